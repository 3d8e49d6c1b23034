"""``direct``: the runtime called in-process, in every process x thread layout that fits the
cores, each process taking the next clip as soon as it is free (as the pool's workers do).
The best layout's throughput is "direct best", the yardstick of the engine and the peer."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import numpy as np

from byoa_skills.bench.clips import LABELS, mix
from byoa_skills.bench.context import Context
from byoa_skills.bench.stats import spread_of, summarize

NAME = "direct"
TITLE = "Runtime called directly"


def layouts(cores: int) -> list[tuple[int, int]]:
    """``(processes, threads)`` pairs whose product is ``cores``, fewest processes first."""
    return [(p, cores // p) for p in range(1, cores + 1) if cores % p == 0]


def _worker(
    model_dir: str,
    name: str,
    device: str,
    threads: int,
    clips: dict[str, np.ndarray],
    jobs: Any,
    out: Any,
) -> None:
    from byoa_skills.runtimes.speech import load_backend

    floats = {label: s.astype(np.float32) / 32768 for label, s in clips.items()}
    backend = load_backend(model_dir, model_name=name, device=device, cpu_threads=threads)
    backend.transcribe(floats["1s"], "en")  # the warm-up the pool's workers run
    out.put(("ready", 0.0))
    while (label := jobs.get()) is not None:
        began = time.perf_counter()
        backend.transcribe(floats[label], "en")
        out.put(("done", time.perf_counter() - began))
    out.put(("stopped", 0.0))


def measure_layout(ctx: Context, processes: int, threads: int) -> dict[str, Any]:
    """Throughput (clips/s) of each round of the mixed load, and each call's latency."""
    context = multiprocessing.get_context("spawn")
    jobs, out = context.Queue(), context.Queue()
    args = (str(ctx.model_dir), ctx.settings.model, "cpu", threads, ctx.clips, jobs, out)
    workers = [context.Process(target=_worker, args=args, daemon=True) for _ in range(processes)]
    labels = mix(ctx.clips, max(ctx.settings.calls, 2 * processes))
    throughputs: list[float] = []
    latencies: list[list[float]] = []
    try:
        for worker in workers:
            worker.start()
        for _ in workers:
            kind, _ = out.get(timeout=600)
            if kind != "ready":
                raise RuntimeError("a direct worker failed to start")
        for _ in range(ctx.settings.rounds):
            began = time.perf_counter()
            for label in labels:
                jobs.put(label)
            times = [out.get(timeout=1200)[1] for _ in labels]
            throughputs.append(len(labels) / (time.perf_counter() - began))
            latencies.append(times)
            ctx.reporter.advance()
        for _ in workers:
            jobs.put(None)
        for _ in workers:
            out.get(timeout=60)
    finally:
        for worker in workers:
            worker.join(timeout=10)
            if worker.is_alive():
                worker.kill()
    ordered = sorted(throughputs)
    return {
        "processes": processes,
        "threads": threads,
        "calls": len(labels),
        "throughput": ordered[len(ordered) // 2],
        "throughput_rounds": throughputs,
        "throughput_spread": spread_of(throughputs),
        "latency_s": summarize([x for g in latencies for x in g], latencies).to_dict(),
    }


def run(ctx: Context) -> dict[str, Any]:
    """Every layout's figures, and which was best."""
    if ctx.settings.device == "cuda":
        ctx.reporter.note("direct: measured on the CPU; the gpu scenario covers CUDA")
    found = layouts(ctx.cores)
    ctx.reporter.start(NAME, len(found) * ctx.settings.rounds)
    results = {}
    for processes, threads in found:
        ctx.reporter.step(f"{processes} process(es) x {threads} thread(s)")
        results[f"{processes}x{threads}"] = measure_layout(ctx, processes, threads)
    best = max(results, key=lambda key: results[key]["throughput"])
    ctx.shared["direct_best"] = results[best]["throughput"]
    return {
        "mix": list(LABELS),
        "layouts": results,
        "best": best,
        "best_throughput": results[best]["throughput"],
    }
