"""The short encoder's speed and accuracy against the whole 30 s window, on the committed
speech clips: for each encoder length, the word error rate over every spoken clip, how many
transcripts changed, and the time to transcribe them one by one on one thread.

    .venv/bin/python scripts/measure_encoder.py [--model base] [--threads 1] [--rounds 3]
    .venv/bin/python scripts/measure_encoder.py --real [--settings 30,15,15+guard]

``--real`` judges on the real (human) speech of tests/data/realspeech/ instead: the word error
rate per language for each setting, and for a setting ending in ``+guard`` (or ``engine``) how
many clips the guard decoded again. A setting without ``+guard`` runs the short window with
the guard off; ``engine`` is the engine's default (``engine_decode_options``: windows sized to
the clip, per-language floors, the guard, greedy where it keeps the words).

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
from byoa_skills.pool.config import DEFAULT_ENCODER_SECONDS, engine_decode_options
from byoa_skills.runtimes.speech import DecodeOptions, load_backend
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
    parser.add_argument("--settings", default=None)
    parser.add_argument("--real", action="store_true", help="judge on tests/data/realspeech/")
    args = parser.parse_args()
    if args.real:
        real_speech(args)
        return
    args.settings = args.settings or "30,20,15,10,fit"
    spoken = [c for c in CLIPS if c["language"]]
    silent = [c for c in CLIPS if not c["language"]]
    audio = {c["file"]: parse_wav((SPEECH / c["file"]).read_bytes()).to_float32() for c in CLIPS}
    backend = load_backend(ensure_model(args.model), cpu_threads=args.threads)
    backend.transcribe(audio[spoken[0]["file"]], "en")
    full: dict[str, str] = {}
    print(
        f"model {args.model}, {args.threads} thread(s), {len(spoken)} spoken clips, "
        f"best of {args.rounds} rounds"
    )
    print("| encoder | WER | changed | silent clips empty | seconds, all clips |")
    print("|---|---|---|---|---|")
    for setting in args.settings.split(","):
        texts: dict[str, str] = {}
        best = math.inf
        for _ in range(args.rounds):
            began = time.perf_counter()
            for clip in spoken + silent:
                seconds = (
                    30.0
                    if setting == "30"
                    else (float(math.ceil(clip["seconds"])) if setting == "fit" else float(setting))
                )
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
        label = (
            "30 s (whole window)"
            if setting == "30"
            else ("each clip's length" if setting == "fit" else f"{setting} s")
        )
        print(
            f"| {label} | {errors / total:.3f} ({errors}/{total}) | {changed} | {empty} | "
            f"{best:.2f} |"
        )
        if setting != "30":
            for clip in spoken:
                if texts[clip["file"]] != full[clip["file"]]:
                    print(
                        f"|   {clip['file']} | {full[clip['file']]!r} → "
                        f"{texts[clip['file']]!r} | | | |"
                    )


def real_speech(args: argparse.Namespace) -> None:
    """WER per language and setting on the real-speech set, language given, one clip at a
    time; the guard's re-decodes; the seconds for all clips (best of ``--rounds``)."""
    import json
    from collections import defaultdict

    import soundfile

    folder = Path(__file__).resolve().parent.parent / "tests" / "data" / "realspeech"
    clips = json.loads((folder / "clips.json").read_text(encoding="utf-8"))
    audio = {}
    for clip in clips:
        samples, rate = soundfile.read(folder / clip["file"], dtype="float32")
        assert rate == 16_000 and samples.ndim == 1, clip["file"]
        audio[clip["file"]] = samples
    backend = load_backend(ensure_model(args.model), cpu_threads=args.threads)
    backend.transcribe(audio[clips[0]["file"]], clips[0]["language"])
    languages = sorted({clip["language"] for clip in clips})
    counts = ", ".join(f"{n} {sum(c['language'] == n for c in clips)}" for n in languages)
    print(
        f"model {args.model}, {args.threads} thread(s), {len(clips)} real-speech clips "
        f"({counts}), language given, best of {args.rounds} rounds"
    )
    header = " | ".join(f"WER {n}" for n in languages)
    print(f"| setting | {header} | WER all | decoded again | seconds, all clips |")
    print("|---|" + "---|" * (len(languages) + 3))
    full: dict[str, str] = {}
    for setting in (args.settings or "30,15,15+guard,engine").split(","):
        if setting == "engine":  # the engine's windows, floors, guard and greedy choice
            guarded, seconds = True, DEFAULT_ENCODER_SECONDS
            backend.options = engine_decode_options(seconds, args.model)
        else:
            guarded = setting.endswith("+guard")
            seconds = float(setting.removesuffix("+guard"))
            backend.options = dataclasses.replace(
                DecodeOptions(),
                encoder_seconds=None if seconds >= 30 else seconds,
                short_window_guard=guarded,
            )
        best, texts, again = math.inf, {}, 0
        for _ in range(args.rounds):
            began = time.perf_counter()
            again = 0
            for clip in clips:
                answer = backend.transcribe(audio[clip["file"]], clip["language"])
                texts[clip["file"]] = answer.text
                again += answer.attempts > 1
            best = min(best, time.perf_counter() - began)
        errors: dict[str, int] = defaultdict(int)
        total: dict[str, int] = defaultdict(int)
        for clip in clips:
            said = words(clip["text"])
            errors[clip["language"]] += edit_distance(said, words(texts[clip["file"]]))
            total[clip["language"]] += len(said)
        if setting == "30":
            full = dict(texts)
        cells = [f"{errors[n] / total[n]:.3f}" for n in languages]
        overall = sum(errors.values()) / sum(total.values())
        print(
            f"| {setting} | {' | '.join(cells)} | {overall:.3f} | "
            f"{again if guarded else '-'} | {best:.2f} |"
        )
        if setting != "30" and full:
            for clip in clips:
                if texts[clip["file"]] != full[clip["file"]]:
                    print(
                        f"|   {clip['file']} | {full[clip['file']]!r} → "
                        f"{texts[clip['file']]!r} |" + " |" * (len(languages) + 2)
                    )


if __name__ == "__main__":
    main()
