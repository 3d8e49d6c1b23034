#!/usr/bin/env python3
"""The torch backend against the CTranslate2 backend on this CPU, in one run.

    scripts/measure_torch.py [--model base] [--repeats 3]

Prints a table of: load times (PyTorch and transformers imported, the first load that
converts model.bin, a load from the verified cache, CTranslate2's load); the median latency
of a 1 s, 5 s and 15 s clip decoded greedily with 1 and 2 threads; and the throughput of
batches of 1, 4 and 8 clips of 5 s with 2 threads. CTranslate2 runs int8 (the engine's
default on the CPU) and float32 (the torch backend's arithmetic). The clips are real
recordings from tests/data/speech (see scripts/gpu_bench.py). Takes about 5 minutes with
``base`` on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_bench import batch_of, model_folder, speech_clips

from byoa_skills.runtimes.speech import DecodeOptions, WhisperCT2Backend

GREEDY = DecodeOptions(beam_size=1)
LENGTHS = (1.0, 5.0, 15.0)
BATCHES = (1, 4, 8)


def timed(call, repeats: int) -> float:  # type: ignore[no-untyped-def]
    """The median wall time of ``repeats`` calls after one warm-up call."""
    call()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="base")
    parser.add_argument("--model-dir", help="take the model's files from this folder")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    folder = model_folder(args.model, args.model_dir)
    print(f"model {args.model}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")

    began = time.perf_counter()
    import torch
    import transformers  # noqa: F401

    from byoa_skills.runtimes.speech import WhisperTorchBackend

    imported = time.perf_counter() - began
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch) / args.model
        fresh.mkdir()
        for file in ("model.bin", "config.json", "tokenizer.json"):
            (fresh / file).symlink_to(folder / file)
        loads = {"import torch + transformers": imported}
        for label in ("torch: first load (converts model.bin)", "torch: load from the cache"):
            began = time.perf_counter()
            WhisperTorchBackend(fresh, options=GREEDY).load()
            loads[label] = time.perf_counter() - began
        shutil.rmtree(fresh)
    began = time.perf_counter()
    WhisperCT2Backend(folder, options=GREEDY).load()
    loads["ct2: load (int8)"] = time.perf_counter() - began
    print("\n| load | s |\n|---|---|")
    for label, seconds in loads.items():
        print(f"| {label} | {seconds:.2f} |")

    def backends(threads: int) -> dict[str, object]:
        torch.set_num_threads(threads)
        made = {
            "torch float32": WhisperTorchBackend(folder, cpu_threads=threads, options=GREEDY),
            "ct2 int8": WhisperCT2Backend(folder, cpu_threads=threads, options=GREEDY),
            "ct2 float32": WhisperCT2Backend(
                folder, compute_type="float32", cpu_threads=threads, options=GREEDY
            ),
        }
        for backend in made.values():
            backend.load()  # type: ignore[attr-defined]
        return made

    names = ("torch float32", "ct2 int8", "ct2 float32")
    print("\nlatency of one clip, greedy, median s")
    print("\n| clip | threads | " + " | ".join(names) + " |\n|---|---|" + "---|" * len(names))
    for threads in (1, 2):
        made = backends(threads)
        for seconds in LENGTHS:
            samples, language = speech_clips(seconds)[0]
            cells = [
                timed(
                    lambda b=made[n], s=samples, lang=language: b.transcribe(s, lang), args.repeats
                )  # type: ignore[attr-defined]
                for n in names
            ]
            print(f"| {seconds:g} s | {threads} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")

    print("\nbatches of 5 s clips, 2 threads: clips/s (batch s)")
    print("\n| batch | torch float32 | ct2 int8 |\n|---|---|---|")
    made = backends(2)
    for size in BATCHES:
        items = batch_of(5.0, size)
        cells = [
            timed(lambda b=made[n], i=items: b.transcribe_batch(i), args.repeats)  # type: ignore[attr-defined]
            for n in ("torch float32", "ct2 int8")
        ]
        print(f"| {size} | " + " | ".join(f"{size / c:.2f} ({c:.2f})" for c in cells) + " |")
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
