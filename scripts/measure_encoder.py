"""The short encoder's speed and accuracy against the whole 30 s window, on the committed
speech clips: for each encoder length, the word error rate over every spoken clip, how many
transcripts changed, and the time to transcribe them one by one on one thread.

    .venv/bin/python scripts/measure_encoder.py [--model base] [--threads 1] [--rounds 3]

"fit" encodes each clip's own length rounded up to a whole second (whisper.cpp's audio
context set per clip); a number encodes that many seconds of every window.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from speech import CLIPS, SPEECH, words

from byoa_skills.models import ensure_model
from byoa_skills.runtimes.speech import load_backend
from byoa_skills.wav import parse_wav


def edit_distance(said: list[str], heard: list[str]) -> int:
    """Word-level Levenshtein distance."""
    row = list(range(len(heard) + 1))
    for i, word in enumerate(said, 1):
        previous, row[0] = row[0], i
        for j, other in enumerate(heard, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (word != other))
    return row[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="base")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settings", default="30,20,15,10,fit")
    args = parser.parse_args()
    spoken = [c for c in CLIPS if c["language"]]
    silent = [c for c in CLIPS if not c["language"]]
    audio = {c["file"]: parse_wav((SPEECH / c["file"]).read_bytes()).to_float32() for c in CLIPS}
    backend = load_backend(ensure_model(args.model), cpu_threads=args.threads)
    backend.transcribe(audio[spoken[0]["file"]], "en")
    full: dict[str, str] = {}
    print(f"model {args.model}, {args.threads} thread(s), {len(spoken)} spoken clips, "
          f"best of {args.rounds} rounds")  # fmt: skip
    print("| encoder | WER | changed | silent clips empty | seconds, all clips |")
    print("|---|---|---|---|---|")
    for setting in args.settings.split(","):
        texts: dict[str, str] = {}
        best = math.inf
        for _ in range(args.rounds):
            began = time.perf_counter()
            for clip in spoken + silent:
                seconds = 30.0 if setting == "30" else (
                    float(math.ceil(clip["seconds"])) if setting == "fit" else float(setting)
                )  # fmt: skip
                backend.options = dataclasses.replace(
                    backend.options, encoder_seconds=None if seconds >= 30 else seconds
                )
                texts[clip["file"]] = backend.transcribe(audio[clip["file"]], clip["language"]).text
            best = min(best, time.perf_counter() - began)
        errors = sum(edit_distance(words(c["text"]), words(texts[c["file"]])) for c in spoken)
        total = sum(len(words(c["text"])) for c in spoken)
        if setting == "30":
            full = dict(texts)
        changed = sum(texts[c["file"]] != full.get(c["file"]) for c in spoken)
        empty = all(texts[c["file"]] == "" for c in silent)
        label = "30 s (whole window)" if setting == "30" else (
            "each clip's length" if setting == "fit" else f"{setting} s")  # fmt: skip
        print(f"| {label} | {errors / total:.3f} ({errors}/{total}) | {changed} | {empty} | "
              f"{best:.2f} |")  # fmt: skip
        if setting != "30":
            for clip in spoken:
                if texts[clip["file"]] != full[clip["file"]]:
                    print(f"|   {clip['file']} | {full[clip['file']]!r} → "
                          f"{texts[clip['file']]!r} | | | |")  # fmt: skip


if __name__ == "__main__":
    main()
