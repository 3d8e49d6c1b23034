"""The short windows (``serve --encoder-seconds 15``: the ladder, its floors and its guard) on
one part of the real-speech set, kind by kind, with the figures ``byoa-bench accuracy`` gives
for the engine's default, so that the two can be read side by side.

    .venv/bin/python scripts/measure_short_windows.py [--part held-out|tune] [--json OUT]

Base int8, one thread, language given, one call at a time, in this process.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from byoa_skills.bench.clips import PARTS, real_records
from byoa_skills.bench.scenarios.accuracy import KINDS, decode_all, plan, tally
from byoa_skills.models.cache import ensure_model
from byoa_skills.pool.config import engine_decode_options
from byoa_skills.runtimes.speech import load_backend


def main() -> None:
    """Decode every call of the part with the short windows; print and keep the tallies."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=PARTS, default="held-out")
    parser.add_argument("--encoder-seconds", type=float, default=15.0)
    parser.add_argument("--json", type=Path, help="where to write the figures")
    args = parser.parse_args()
    calls = [c for c in plan(real_records()) if c.part == args.part]
    options = engine_decode_options(args.encoder_seconds, "base")
    backend = load_backend(ensure_model("base"), model_name="base", cpu_threads=1, options=options)
    first = calls[0]
    backend.transcribe(first.samples().astype(np.float32) / 32768.0, first.language)  # warm
    figures = {}
    for kind in KINDS:
        figures[kind] = tally(decode_all(backend, [c for c in calls if c.kind == kind]))
        shown = {k: figures[kind][k] for k in ("wer", "doubled", "decoded_again", "seconds")}
        print(kind, json.dumps(shown), flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
