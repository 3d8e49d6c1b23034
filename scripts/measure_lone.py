"""A lone call's encoder on the idle cores: for a real clip of each window of the engine's
ladder, the seconds of ``transcribe`` with the encoder on the worker's one thread and on
``--wide`` threads (the decode stays on one thread), median of ``--repeats``; and the resident
memory of a worker without and with the second copy of the model that the wide encoder is.

    .venv/bin/python scripts/measure_lone.py --repeats 7
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
#: A clip for each window: (file, language, the window the engine gives it).
CLIPS = (
    ("en-cmu-cards-003.flac", "en", 5),
    ("en-librivox-0870.flac", "en", 10),
    ("jfk.wav", "en", 15),
    ("ru-ast-tt-allbusy.flac", "ru", 30),
)

RSS = """
import sys
from byoa_skills.models import ensure_model
from byoa_skills.pool.config import engine_decode_options
from byoa_skills.pool.memory import rss_mib
from byoa_skills.pool.worker_main import warm_up_samples
from byoa_skills.runtimes.speech import load_backend
wide = int(sys.argv[1])
backend = load_backend(ensure_model(sys.argv[2]), cpu_threads=1, wide_threads=wide,
                       options=engine_decode_options(15.0, sys.argv[2]))
backend.transcribe_batch([(warm_up_samples(), "en")], wide=bool(wide))
print(rss_mib())
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="base")
    parser.add_argument("--wide", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    import soundfile

    from byoa_skills.models import ensure_model
    from byoa_skills.pool.config import engine_decode_options
    from byoa_skills.runtimes.speech import load_backend

    backend = load_backend(
        ensure_model(args.model),
        cpu_threads=1,
        wide_threads=args.wide,
        options=engine_decode_options(15.0, args.model),
    )
    print(
        f"model {args.model}, decode on 1 thread, encoder on 1 or {args.wide}, "
        f"median of {args.repeats}"
    )
    print(f"| clip | window | tokens | encoder on 1 thread s | on {args.wide} threads s | ratio |")
    print("|---|---|---|---|---|---|")
    for file, language, window in CLIPS:
        folder = DATA / ("speech" if file.endswith(".wav") else "realspeech")
        samples, _ = soundfile.read(folder / file, dtype="float32")
        times: dict[bool, list[float]] = {False: [], True: []}
        answer = None
        for _ in range(args.repeats):
            for wide in (False, True):
                began = time.perf_counter()
                answer = backend.transcribe_batch([(samples, language)], wide=wide)[0]
                times[wide].append(time.perf_counter() - began)
        assert answer is not None and not isinstance(answer, Exception)
        assert answer.window_seconds == window, (file, answer.window_seconds)
        narrow, broad = (statistics.median(times[w]) for w in (False, True))
        print(
            f"| {file} ({len(samples) / 16000:.1f} s) | {window} s | {answer.tokens} | "
            f"{narrow:.3f} | {broad:.3f} | {broad / narrow:.2f} |"
        )
    sizes = {}
    for wide in (0, args.wide):
        out = subprocess.run(
            [sys.executable, "-c", RSS, str(wide), args.model],
            capture_output=True,
            text=True,
            check=True,
        )
        sizes[wide] = float(out.stdout.strip().splitlines()[-1])
    print(json.dumps({"worker_rss_mib": sizes[0], "with_wide_encoder_mib": sizes[args.wide]}))


if __name__ == "__main__":
    main()
