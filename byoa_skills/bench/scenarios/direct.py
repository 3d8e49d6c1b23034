"""``direct``: the runtime called in-process, in every process x thread layout that fits the
cores, each process taking the next clip as soon as it is free (as the pool's workers do).
The best layout's throughput is "direct best", the yardstick of the engine and the peer.
Then the best layout once more with faster-whisper's own ``transcribe`` on a 15 s window
(``chunk_length=15``, the engine's decoding options otherwise): "direct best, 15 s window",
the yardstick of the engine's default short window."""

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
#: The short window faster-whisper is given for the second yardstick, in seconds.
SHORT_WINDOW = 15


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
    chunk_length: int | None = None,
) -> None:
    floats = {label: s.astype(np.float32) / 32768 for label, s in clips.items()}
    transcribe = _transcriber(model_dir, name, device, threads, chunk_length)
    transcribe(floats["1s"])  # the warm-up the pool's workers run
    out.put(("ready", 0.0))
    while (label := jobs.get()) is not None:
        began = time.perf_counter()
        transcribe(floats[label])
        out.put(("done", time.perf_counter() - began))
    out.put(("stopped", 0.0))


def _transcriber(
    model_dir: str, name: str, device: str, threads: int, chunk_length: int | None
) -> Any:
    """``transcribe(samples)`` in English: the engine's runtime (``chunk_length`` None), or
    faster-whisper's own ``transcribe`` on windows of ``chunk_length`` seconds."""
    from byoa_skills.runtimes.speech import DecodeOptions, load_backend

    if chunk_length is None:
        backend = load_backend(model_dir, model_name=name, device=device, cpu_threads=threads)
        return lambda samples: backend.transcribe(samples, "en")
    from faster_whisper import WhisperModel

    model = WhisperModel(model_dir, device=device, compute_type="int8", cpu_threads=threads)
    o = DecodeOptions()

    def transcribe(samples: np.ndarray) -> str:
        segments, _ = model.transcribe(
            samples, language="en", beam_size=o.beam_size, temperature=o.TEMPERATURE,
            compression_ratio_threshold=None, condition_on_previous_text=False,
            without_timestamps=True, vad_filter=True, max_new_tokens=o.max_new_tokens,
            chunk_length=chunk_length,
        )  # fmt: skip
        return "".join(segment.text for segment in segments)

    return transcribe


def measure_layout(
    ctx: Context, processes: int, threads: int, chunk_length: int | None = None
) -> dict[str, Any]:
    """Throughput (clips/s) of each round of the mixed load, and each call's latency."""
    context = multiprocessing.get_context("spawn")
    jobs, out = context.Queue(), context.Queue()
    args = (str(ctx.model_dir), ctx.settings.model, "cpu", threads, ctx.clips, jobs, out,
            chunk_length)  # fmt: skip
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
    ctx.reporter.start(NAME, (len(found) + 1) * ctx.settings.rounds)
    results = {}
    for processes, threads in found:
        ctx.reporter.step(f"{processes} process(es) x {threads} thread(s)")
        results[f"{processes}x{threads}"] = measure_layout(ctx, processes, threads)
    best = max(results, key=lambda key: results[key]["throughput"])
    ctx.shared["direct_best"] = results[best]["throughput"]
    processes, threads = results[best]["processes"], results[best]["threads"]
    ctx.reporter.step(f"{best}, faster-whisper on a {SHORT_WINDOW} s window")
    short = measure_layout(ctx, processes, threads, chunk_length=SHORT_WINDOW)
    ctx.shared["direct_best_short"] = short["throughput"]
    return {
        "mix": list(LABELS),
        "layouts": results,
        "best": best,
        "best_throughput": results[best]["throughput"],
        "short_window_s": SHORT_WINDOW,
        "best_short": short,
        "best_short_throughput": short["throughput"],
    }
