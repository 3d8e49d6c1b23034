"""The encoder window and the decode per clip, measured on the real speech of
tests/data/realspeech/: what each window (5, 10, 15, 30 s) and each decode (greedy, beam 5)
hears in each clip, with its tokens, log-probability and time, on one thread. Then the
policies the engine could take, judged from those figures: the word error rate per
language, how often the guard decodes again, and the model's seconds for all clips.

    .venv/bin/python scripts/measure_windows.py --repeats 3 --json /tmp/windows.json
    .venv/bin/python scripts/measure_windows.py --load /tmp/windows.json   # the tables again

The times are each decode's median over ``--repeats`` calls (VAD, features, encoder and
decoder: ``backend.transcribe`` with the window and the decode fixed and no guard). A
policy's time is the sum of the decodes it makes: the first, and every one the guard asks
for. The words are deterministic; only the seconds move with what else runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from speech import words

from byoa_skills.runtimes.speech import DecodeOptions
from byoa_skills.runtimes.speech.base import Transcript
from byoa_skills.runtimes.speech.whisper_ct2 import agreeable_text, guard_step

REALSPEECH = Path(__file__).resolve().parent.parent / "tests" / "data" / "realspeech"
WINDOWS = (5.0, 10.0, 15.0, 30.0)
BEAMS = (1, 5)
#: The clip-length groups of the tables (seconds of the clip, upper bounds).
GROUPS = ((0.0, 2.0, "1-2 s"), (2.0, 6.0, "2-6 s"), (6.0, 30.0, "6-15 s"))


def edit_distance(said: list[str], heard: list[str]) -> int:
    """Word-level Levenshtein distance."""
    row = list(range(len(heard) + 1))
    for i, word in enumerate(said, 1):
        previous, row[0] = row[0], i
        for j, other in enumerate(heard, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (word != other))
    return row[-1]


def load_real() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The clips' records and their float32 samples."""
    import soundfile

    clips = json.loads((REALSPEECH / "clips.json").read_text(encoding="utf-8"))
    audio = {}
    for clip in clips:
        samples, rate = soundfile.read(REALSPEECH / clip["file"], dtype="float32")
        assert rate == 16_000 and samples.ndim == 1, clip["file"]
        audio[clip["file"]] = samples
    return clips, audio


def measure(model: str, threads: int, repeats: int) -> dict[str, Any]:
    """Every clip on every window that holds its speech, greedy and beam 5."""
    from byoa_skills.models import ensure_model
    from byoa_skills.runtimes.speech import load_backend

    clips, audio = load_real()
    backend = load_backend(ensure_model(model), cpu_threads=threads)
    backend.transcribe(audio[clips[0]["file"]], clips[0]["language"])
    rows: dict[str, dict[str, Any]] = {}
    for number, clip in enumerate(clips, 1):
        print(f"{number}/{len(clips)} {clip['file']}", file=sys.stderr)
        decodes: dict[str, Any] = {}
        for window in WINDOWS:
            for beams in BEAMS:
                backend.options = DecodeOptions(
                    beam_size=beams,
                    encoder_seconds=None if window >= 30 else window,
                    short_window_guard=False,
                )
                times, answer = [], None
                for _ in range(repeats):
                    began = time.perf_counter()
                    answer = backend.transcribe(audio[clip["file"]], clip["language"])
                    times.append(time.perf_counter() - began)
                assert answer is not None
                if answer.window_seconds != window:
                    continue  # the speech does not fit in this window
                decodes[f"{window:g}/{beams}"] = {
                    "text": answer.text,
                    "tokens": answer.tokens,
                    "avg_logprob": answer.avg_logprob,
                    "budget_hit": answer.budget_hit,
                    "seconds": statistics.median(times),
                    "speech": answer.speech_seconds,
                }
        rows[clip["file"]] = {
            "language": clip["language"],
            "text": clip["text"],
            "seconds": clip["seconds"],
            "decodes": decodes,
        }
    return {"model": model, "threads": threads, "repeats": repeats, "clips": rows}


def _transcript(decode: dict[str, Any]) -> Transcript:
    return Transcript(
        text=decode["text"],
        language=None,
        language_probability=1.0,
        seconds=0.0,
        tokens=decode["tokens"],
        budget_hit=decode["budget_hit"],
        avg_logprob=decode["avg_logprob"],
    )


def simulate(options: DecodeOptions, row: dict[str, Any]) -> tuple[str, float, int, str]:
    """What ``options`` answers for one measured clip: (text, seconds, decodes, how), with
    the guard's steps taken from the measured decodes."""
    decodes = row["decodes"]
    speech = next(iter(decodes.values()))["speech"]
    language = row["language"]
    window = options.first_window(speech, language)
    beams = options.beams_for(speech, language)
    seconds, count, unsure_before = 0.0, 0, None
    while True:
        decode = decodes[f"{window:g}/{beams}"]
        count += 1
        # a beam decode after a greedy one reuses the encoder output: the time of the
        # decoder only is not known apart, so the whole decode is counted (an upper bound)
        seconds += decode["seconds"]
        answer = _transcript(decode)
        step = guard_step(options, window, beams, speech, answer, unsure_before)
        if step is None:
            return decode["text"], seconds, count, f"{window:g}/{beams}"
        if step == "beam":
            beams = options.beam_size
        else:
            window = float(step)
            unsure_before = agreeable_text(options, answer)


def judge(data: dict[str, Any], options: DecodeOptions) -> dict[str, Any]:
    """WER per language and overall, decodes again, seconds, for one policy."""
    errors: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    seconds, again, texts = 0.0, 0, {}
    by_language: dict[str, float] = defaultdict(float)
    for file, row in data["clips"].items():
        text, spent, count, how = simulate(options, row)
        by_language[row["language"]] += spent
        said = words(row["text"])
        errors[row["language"]] += edit_distance(said, words(text))
        total[row["language"]] += len(said)
        seconds += spent
        again += count > 1
        texts[file] = (text, how)
    return {
        "wer": {n: errors[n] / total[n] for n in sorted(total)},
        "wer_all": sum(errors.values()) / sum(total.values()),
        "errors": dict(errors),
        "words": dict(total),
        "again": again,
        "seconds": seconds,
        "texts": texts,
        "seconds_by_language": dict(by_language),
    }


def policies() -> dict[str, DecodeOptions]:
    """The policies compared: the whole window, the old default, and windows sized to the
    clip with and without greedy decoding."""
    from byoa_skills.pool.config import DEFAULT_ENCODER_SECONDS, engine_decode_options

    guard = {"max_tokens_per_second": 12.0}
    return {
        "the engine's default": engine_decode_options(DEFAULT_ENCODER_SECONDS, "base"),
        "30 beam": DecodeOptions(),
        "15 beam (old default)": DecodeOptions(encoder_seconds=15.0),
        "10/15 beam": DecodeOptions(encoder_seconds=15.0, windows=(10.0,), **guard),
        "5/10/15 beam": DecodeOptions(encoder_seconds=15.0, windows=(5.0, 10.0), **guard),
        "5/10/15 +1 s beam": DecodeOptions(
            encoder_seconds=15.0, windows=(5.0, 10.0), window_margin=1.0, **guard
        ),
        "5/10/15 +2 s beam": DecodeOptions(
            encoder_seconds=15.0, windows=(5.0, 10.0), window_margin=2.0, **guard
        ),
        "30 greedy": DecodeOptions(greedy_up_to_seconds=30.0),
        "15 greedy": DecodeOptions(encoder_seconds=15.0, greedy_up_to_seconds=30.0),
        "5/10/15 +1 s greedy": DecodeOptions(
            encoder_seconds=15.0,
            windows=(5.0, 10.0),
            window_margin=1.0,
            greedy_up_to_seconds=30.0,
            **guard,
        ),
        "5/10/15 +1 s greedy, beam < -0.6": DecodeOptions(
            encoder_seconds=15.0,
            windows=(5.0, 10.0),
            window_margin=1.0,
            greedy_up_to_seconds=30.0,
            greedy_fallback_logprob=-0.6,
            **guard,
        ),
        "5/10/15 +1 s greedy, beam < -0.4": DecodeOptions(
            encoder_seconds=15.0,
            windows=(5.0, 10.0),
            window_margin=1.0,
            greedy_up_to_seconds=30.0,
            greedy_fallback_logprob=-0.4,
            **guard,
        ),
    }


def decode_table(data: dict[str, Any]) -> list[str]:
    """Greedy against beam 5 on each window, by language and clip-length group: word errors
    and the median seconds of one clip."""
    head = (
        "| language | clips | window | greedy errors / words | beam 5 errors / words "
        "| greedy s (median) | beam 5 s (median) |"
    )
    lines = [head, "|---|---|---|---|---|---|---|"]
    rows = data["clips"].values()
    languages = sorted({row["language"] for row in rows})
    for language in languages:
        for low, high, name in GROUPS:
            group = [r for r in rows if r["language"] == language and low < r["seconds"] <= high]
            if not group:
                continue
            for window in WINDOWS:
                key1, key5 = f"{window:g}/1", f"{window:g}/5"
                held = [r for r in group if key1 in r["decodes"]]
                if not held:
                    continue
                said = [words(r["text"]) for r in held]
                e1 = sum(
                    edit_distance(s, words(r["decodes"][key1]["text"]))
                    for s, r in zip(said, held, strict=True)
                )
                e5 = sum(
                    edit_distance(s, words(r["decodes"][key5]["text"]))
                    for s, r in zip(said, held, strict=True)
                )
                n = sum(len(s) for s in said)
                t1 = statistics.median(r["decodes"][key1]["seconds"] for r in held)
                t5 = statistics.median(r["decodes"][key5]["seconds"] for r in held)
                lines.append(
                    f"| {language} | {name}: {len(held)} | {window:g} s | {e1}/{n} | "
                    f"{e5}/{n} | {t1:.3f} | {t5:.3f} |"
                )
    return lines


def policy_table(data: dict[str, Any], chosen: dict[str, DecodeOptions]) -> list[str]:
    """Each policy's WER per language, decodes again and seconds for all clips."""
    languages = sorted({row["language"] for row in data["clips"].values()})
    head = " | ".join(f"WER {n}" for n in languages)
    secs = " | ".join(f"s {n}" for n in languages)
    lines = [
        f"| policy | {head} | WER all | decoded again | {secs} | seconds, all clips |",
        "|---|" + "---|" * (2 * len(languages) + 3),
    ]
    for name, options in chosen.items():
        result = judge(data, options)
        cells = " | ".join(f"{result['wer'][n]:.3f}" for n in languages)
        spent = " | ".join(f"{result['seconds_by_language'][n]:.1f}" for n in languages)
        lines.append(
            f"| {name} | {cells} | {result['wer_all']:.3f} | {result['again']} | "
            f"{spent} | {result['seconds']:.2f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="base")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the measurements here")
    parser.add_argument("--load", type=Path, help="read earlier measurements instead")
    args = parser.parse_args()
    if args.load:
        data = json.loads(args.load.read_text(encoding="utf-8"))
    else:
        data = measure(args.model, args.threads, args.repeats)
        if args.json:
            args.json.write_text(json.dumps(data, ensure_ascii=False, indent=1), "utf-8")
    print(
        f"model {data['model']}, {data['threads']} thread(s), {len(data['clips'])} clips, "
        f"median of {data['repeats']}"
    )
    print("\n".join(decode_table(data)))
    print()
    print("\n".join(policy_table(data, policies())))


if __name__ == "__main__":
    main()
