"""Measure the decoding choices of the Whisper backend on the speech clips in tests/data/speech.

For each clip: latency (median of ``--repeats`` warm calls) and word error rate against the
text spoken, for beam 1 and beam 5, with the VAD on and off; language detection from the
shared encoder pass against faster-whisper's own ``transcribe(language=None)``; and silence
and noise with and without faster-whisper's temperature fallback. Prints Markdown tables.

Usage: .venv/bin/python scripts/measure_decoding.py MODEL_DIR [--threads 1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path

import numpy as np

from byoa_skills.runtimes.speech import DecodeOptions, WhisperCT2Backend

CLIPS = Path(__file__).resolve().parent.parent / "tests" / "data" / "speech"


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` with punctuation and accents' case differences removed."""
    text = unicodedata.normalize("NFC", text).lower()
    return re.sub(r"[^\w\s']|_", " ", text).replace("'", "").split()


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """``(edits, reference words)``: the word-level Levenshtein distance and the length."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[len(hyp)], len(ref)


def read_wav(path: Path) -> np.ndarray:
    """The float32 samples of a plain 44-byte-header 16 kHz mono 16-bit WAV."""
    data = path.read_bytes()
    return np.frombuffer(data, dtype="<i2", offset=44).astype(np.float32) / 32768.0


def timed(call: Callable[[], str], repeats: int) -> tuple[float, list[str]]:
    """Median wall time of ``repeats`` calls, and the text of each."""
    times, texts = [], []
    for _ in range(repeats):
        began = time.perf_counter()
        texts.append(call())
        times.append(time.perf_counter() - began)
    return statistics.median(times), texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args()

    clips = json.loads((CLIPS / "clips.json").read_text())
    audio = {c["file"]: read_wav(CLIPS / c["file"]) for c in clips}
    speech = [c for c in clips if c["language"]]
    quiet = [c for c in clips if not c["language"]]

    def backend(**options: object) -> WhisperCT2Backend:
        b = WhisperCT2Backend(
            args.model_dir, cpu_threads=args.threads, options=DecodeOptions(**options)
        )
        b.load()
        b.transcribe(audio["jfk.wav"], "en")  # warm up
        return b

    from faster_whisper import WhisperModel
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    raw = WhisperModel(
        str(args.model_dir), device="cpu", compute_type="int8", cpu_threads=args.threads
    )

    def raw_text(samples: np.ndarray, language: str | None, **kwargs: object) -> str:
        segments, _ = raw.transcribe(samples, language=language, **kwargs)
        return "".join(s.text for s in segments).strip()

    results: dict[str, object] = {
        "machine": f"{platform.processor() or platform.machine()}, {args.threads} thread(s)",
        "repeats": args.repeats,
    }

    # 1. Beam 1 against beam 5, VAD on and off, language given.
    variants = {
        "b1": {"beam_size": 1},
        "b5": {"beam_size": 5},
        "b1-novad": {"beam_size": 1, "vad_filter": False},
        "b5-novad": {"beam_size": 5, "vad_filter": False},
    }
    per_clip: dict[str, dict[str, object]] = {c["file"]: {} for c in clips}
    for name, options in variants.items():
        b = backend(**options)
        for c in clips:
            samples, lang = audio[c["file"]], c["language"]
            seconds, texts = timed(
                lambda b=b, s=samples, lang=lang: b.transcribe(s, lang).text, args.repeats
            )
            edits, n = word_errors(c["text"], texts[0])
            per_clip[c["file"]][name] = {
                "seconds": seconds,
                "text": texts[0],
                "edits": edits,
                "words": n,
                "same": len(set(texts)) == 1,
            }
        del b

    # 2. The VAD alone.
    vad = VadOptions()
    for c in clips:
        seconds, _ = timed(
            lambda s=audio[c["file"]]: str(get_speech_timestamps(s, vad)), args.repeats
        )
        per_clip[c["file"]]["vad-only"] = seconds

    # 3. Language detection: shared encoder pass (ours) against faster-whisper's transcribe().
    b = backend(beam_size=1)
    options = {
        "beam_size": 1,
        "temperature": 0.0,
        "condition_on_previous_text": False,
        "without_timestamps": True,
        "vad_filter": True,
    }
    for c in speech:
        samples = audio[c["file"]]
        ours, texts = timed(lambda s=samples: b.transcribe(s, None).text, args.repeats)
        theirs, _ = timed(lambda s=samples: raw_text(s, None, **options), args.repeats)
        per_clip[c["file"]]["detect"] = {
            "ours": ours,
            "faster-whisper": theirs,
            "language": b.transcribe(samples, None).language,
        }

    # 4. Silence and noise: faster-whisper's defaults (temperature fallback, no VAD), the same
    # at temperature 0, and ours.
    for c in quiet:
        samples = audio[c["file"]]
        runs = {
            "fallback (faster-whisper defaults)": lambda s=samples: raw_text(s, None),
            "temperature 0, no VAD": lambda s=samples: raw_text(
                s, None, temperature=0.0, condition_on_previous_text=False
            ),
            "ours (temperature 0, VAD)": lambda s=samples: b.transcribe(s, None).text,
        }
        per_clip[c["file"]]["quiet"] = {}
        for label, call in runs.items():
            seconds, texts = timed(call, args.repeats)
            per_clip[c["file"]]["quiet"][label] = {"seconds": seconds, "texts": texts}
    results["clips"] = per_clip
    print_tables(clips, per_clip, results)
    if args.json:
        args.json.write_text(json.dumps(results, ensure_ascii=False, indent=2) + "\n")


def print_tables(clips: list[dict], per_clip: dict, results: dict) -> None:
    """The figures as Markdown tables."""
    print(f"Machine: {results['machine']}; median of {results['repeats']} warm calls.\n")
    print(
        "| clip | s | beam 1 s | beam 5 s | beam 1 WER | beam 5 WER | b1 no VAD s "
        "| b5 no VAD s | VAD alone s | beam 1 text |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    totals = {k: [0, 0] for k in ("b1", "b5", "b1-novad", "b5-novad")}
    for c in clips:
        f = per_clip[c["file"]]
        for k, t in totals.items():
            t[0] += f[k]["edits"]
            t[1] += f[k]["words"]

        def wer(k: str, f: dict = f) -> str:
            return f"{f[k]['edits']}/{f[k]['words']}" if f[k]["words"] else "-"

        print(
            f"| {c['file']} | {c['seconds']:.1f} | {f['b1']['seconds']:.2f} "
            f"| {f['b5']['seconds']:.2f} | {wer('b1')} | {wer('b5')} "
            f"| {f['b1-novad']['seconds']:.2f} | {f['b5-novad']['seconds']:.2f} "
            f"| {f['vad-only']:.3f} | {f['b1']['text'] or '(empty)'} |"
        )
    for k, (edits, n) in totals.items():
        mean = statistics.mean(per_clip[c["file"]][k]["seconds"] for c in clips)
        print(f"\n{k}: WER {edits}/{n} = {edits / n:.1%}, mean latency {mean:.2f} s", end="")
    print("\n\nb5 texts where they differ from b1:")
    for c in clips:
        f = per_clip[c["file"]]
        if f["b5"]["text"] != f["b1"]["text"]:
            print(f"- {c['file']}: b1 {f['b1']['text']!r} / b5 {f['b5']['text']!r}")
    print("\n| clip | detected | ours s | faster-whisper transcribe(language=None) s |")
    print("|---|---|---|---|")
    for c in clips:
        d = per_clip[c["file"]].get("detect")
        if d:
            ours, theirs = d["ours"], d["faster-whisper"]
            print(f"| {c['file']} | {d['language']} | {ours:.2f} | {theirs:.2f} |")
    print("\n| clip | decoding | s | texts of the runs |")
    print("|---|---|---|---|")
    for c in clips:
        q = per_clip[c["file"]].get("quiet")
        for label, r in (q or {}).items():
            texts = " / ".join(repr(t) for t in r["texts"])
            print(f"| {c['file']} | {label} | {r['seconds']:.2f} | {texts} |")


if __name__ == "__main__":
    main()
