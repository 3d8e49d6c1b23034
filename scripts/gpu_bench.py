#!/usr/bin/env python3
"""Batched throughput of the torch backend: batch sizes by clip lengths, on CUDA or the CPU.

    scripts/gpu_bench.py --device cuda --out OUTDIR           # the GPU check (float16)
    scripts/gpu_bench.py --device cpu --batches 1,2 --quick   # a short run that proves it works

Each clip is a real recording from tests/data/speech near the length asked for (English,
Russian and Slovak, in turn), cut or padded with silence to exactly that length, and given
its language. For every length and
batch size: one warm-up batch, then ``--repeats`` timed batches; the figures are the median.
Prints a table and writes ``gpu-bench.json`` into ``--out`` when given.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
SPEECH = ROOT / "tests" / "data" / "speech"
RATE = 16000
SPOKEN = ("sentence", "human", "country")


def speech_clips(seconds: float) -> list[tuple[np.ndarray, str]]:
    """Real recordings from tests/data/speech near ``seconds`` long (a third of it to a tenth
    more), each cut or padded with silence to exactly ``seconds``, with its language."""
    catalog = json.loads((SPEECH / "clips.json").read_text(encoding="utf-8"))
    chosen = [
        clip
        for clip in catalog
        if clip["kind"] in SPOKEN and seconds / 3 <= clip["seconds"] <= seconds * 1.1
    ]
    if not chosen:
        raise SystemExit(f"no recording in {SPEECH} is near {seconds} s long")
    length = round(seconds * RATE)
    clips = []
    for clip in sorted(chosen, key=lambda c: -c["seconds"]):
        data = (SPEECH / clip["file"]).read_bytes()
        samples = np.frombuffer(data, dtype="<i2", offset=44).astype(np.float32) / 32768
        samples = np.pad(samples[:length], (0, max(0, length - samples.size)))
        clips.append((samples.astype(np.float32), clip["language"]))
    return clips


def batch_of(seconds: float, size: int) -> list[tuple[np.ndarray, str]]:
    """``size`` clips of ``seconds``: the recordings of :func:`speech_clips` in turn."""
    clips = speech_clips(seconds)
    return [clips[i % len(clips)] for i in range(size)]


def model_folder(name: str, folder: str | None) -> Path:
    from byoa_skills.models import ensure_model

    return Path(ensure_model(name, local_dir=folder))


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from byoa_skills.runtimes.speech import WhisperTorchBackend

    began = time.perf_counter()
    backend = WhisperTorchBackend(
        model_folder(args.model, args.model_dir),
        device=args.device,
        compute_type=args.compute_type,
        cpu_threads=args.threads,
    )
    backend.load()
    load_s = time.perf_counter() - began
    cuda = args.device == "cuda"
    rows = []
    for seconds in args.lengths:
        for batch in args.batches:
            items = batch_of(seconds, batch)
            backend.transcribe_batch(items)  # warm-up: kernels, allocator
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                answers = backend.transcribe_batch(items)
                times.append(time.perf_counter() - start)
            median = statistics.median(times)
            texts = [getattr(a, "text", "") for a in answers]
            row = {
                "seconds": seconds,
                "batch": batch,
                "median_s": round(median, 4),
                "clips_per_s": round(batch / median, 2),
                "audio_s_per_s": round(batch * seconds / median, 1),
                "ms_per_clip": round(1000 * median / batch, 1),
                "empty_answers": sum(not t for t in texts),
                "peak_mib": round(torch.cuda.max_memory_allocated() / 2**20) if cuda else None,
            }
            rows.append(row)
            print(_line(row), flush=True)
    return {
        "device": args.device,
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "model": args.model,
        "compute_type": backend.compute_type,
        "max_batch_size": backend.max_batch_size,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "load_s": round(load_s, 2),
        "weights_converted": backend.weights_converted,
        "repeats": args.repeats,
        "rows": rows,
        "sample_text": texts[0] if texts else "",
    }


HEADER = "clip s | batch | batch s | clips/s | audio s/s | ms/clip | empty | peak MiB"


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['seconds']:>6} | {row['batch']:>5} | {row['median_s']:>7.3f} | "
        f"{row['clips_per_s']:>7} | {row['audio_s_per_s']:>9} | {row['ms_per_clip']:>7} | "
        f"{row['empty_answers']:>5} | {row['peak_mib'] if row['peak_mib'] is not None else '-'}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--model", default="base")
    parser.add_argument("--model-dir", help="take the model's files from this folder")
    parser.add_argument("--compute-type", default="default", help="default: float16 on CUDA")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's)")
    parser.add_argument("--batches", default="1,2,4,8,16,32,64")
    parser.add_argument("--lengths", default="1,5,15", help="clip lengths in seconds")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="lengths 1,5 and one repeat")
    parser.add_argument("--out", type=Path, help="write gpu-bench.json into this folder")
    args = parser.parse_args(argv)
    args.batches = [int(b) for b in args.batches.split(",")]
    args.lengths = [float(s) for s in args.lengths.split(",")]
    if args.quick:
        args.lengths, args.repeats = [1.0, 5.0], 1
    print(HEADER, flush=True)
    result = run(args)
    print(
        f"load {result['load_s']} s (converted: {result['weights_converted']}), "
        f"max batch {result['max_batch_size']}, {result['compute_type']} on "
        f"{result['gpu'] or 'cpu'}; first text: {result['sample_text']!r}"
    )
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu-bench.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
