"""``direct``: the runtime called in-process, in every process x thread layout that fits the
cores, each process taking the next clip as soon as it is free (as the pool's workers do), on
the mixed real clips in their languages.

Twice per layout: with the whole 30 s window and beam 5 (faster-whisper's own way:
``DecodeOptions()``), whose best layout is "direct best", the hardware with no engine at all;
and with the engine's own windows, guard and decode choices
(:func:`byoa_skills.pool.config.engine_decode_options`), whose best layout is "direct best,
short windows": what the engine's decoding gives without the pool, so that the engine's
throughput over it is what the pool costs. When the engine's decoding is the whole window (its
default), the one measurement serves both (``engine_decodes_as_whole``).

And once more per layout with faster-whisper itself, as a user calls it: ``WhisperModel``
(CTranslate2 int8, its own encoder) and its ``transcribe`` with the language and beam 5, every
other option its default. Its best layout is "faster-whisper direct", the yardstick of "faster
than calling faster-whisper yourself": the runtime's own encoder (OpenVINO where ``auto``
chooses it) makes "direct best" faster than faster-whisper, so the two are not the same."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import numpy as np

from byoa_skills.bench.context import Context
from byoa_skills.bench.stats import spread_of, summarize

NAME = "direct"
TITLE = "Runtime called directly"
#: The ways measured in each layout: the runtime with the whole window, with the engine's
#: windows, and faster-whisper's own ``transcribe``.
WAYS = ("whole", "engine", "faster-whisper")


def layouts(cores: int) -> list[tuple[int, int]]:
    """``(processes, threads)`` pairs whose product is ``cores``, fewest processes first."""
    return [(p, cores // p) for p in range(1, cores + 1) if cores % p == 0]


def _worker(
    model_dir: str,
    name: str,
    device: str,
    threads: int,
    clips: dict[str, tuple[np.ndarray, str]],
    jobs: Any,
    out: Any,
    way: str,
) -> None:
    from byoa_skills.pool.config import DEFAULT_ENCODER_SECONDS, engine_decode_options
    from byoa_skills.runtimes.speech import DecodeOptions, load_backend

    floats = {key: (s.astype(np.float32) / 32768, lang) for key, (s, lang) in clips.items()}
    if way == "faster-whisper":
        transcribe = _faster_whisper(model_dir, device, threads)
    else:
        options = engine_decode_options(DEFAULT_ENCODER_SECONDS, name) if way == "engine" else None
        backend = load_backend(
            model_dir,
            model_name=name,
            device=device,
            cpu_threads=threads,
            options=options or DecodeOptions(),
        )
        transcribe = backend.transcribe
    transcribe(*floats[next(iter(floats))])  # the warm-up the pool's workers run
    out.put(("ready", 0.0))
    while (key := jobs.get()) is not None:
        began = time.perf_counter()
        transcribe(*floats[key])
        out.put(("done", time.perf_counter() - began))
    out.put(("stopped", 0.0))


def _faster_whisper(model_dir: str, device: str, threads: int) -> Any:
    """faster-whisper as a user calls it: a function of (samples, language) to the text."""
    from faster_whisper import WhisperModel

    model = WhisperModel(
        model_dir, device=device, compute_type="int8", cpu_threads=threads, local_files_only=True
    )

    def transcribe(samples: np.ndarray, language: str | None) -> str:
        segments, _ = model.transcribe(samples, language=language, beam_size=5)
        return "".join(segment.text for segment in segments)

    return transcribe


def measure_layout(ctx: Context, processes: int, threads: int, way: str) -> dict[str, Any]:
    """Throughput (clips/s) of each round of the mixed load, and each call's latency, with
    the whole window (``way`` ``whole``) or the engine's windows (``engine``)."""
    context = multiprocessing.get_context("spawn")
    jobs, out = context.Queue(), context.Queue()
    labels = ctx.real_mix(max(ctx.settings.calls, 2 * processes))
    clips = {key: (ctx.clips[key], ctx.language(key)) for key in set(labels)}
    args = (str(ctx.model_dir), ctx.settings.model, "cpu", threads, clips, jobs, out, way)
    workers = [context.Process(target=_worker, args=args, daemon=True) for _ in range(processes)]
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
    """Every layout's figures each way, and which layout was best each way."""
    if ctx.settings.device == "cuda":
        ctx.reporter.note("direct: measured on the CPU; the gpu scenario covers CUDA")
    from byoa_skills.pool.config import DEFAULT_ENCODER_SECONDS, engine_decode_options
    from byoa_skills.runtimes.speech import DecodeOptions

    found = layouts(ctx.cores)
    # when the engine decodes as faster-whisper does, one measurement is both ways'
    same = engine_decode_options(DEFAULT_ENCODER_SECONDS, ctx.settings.model) == DecodeOptions()
    ways = [way for way in WAYS if not (same and way == "engine")]
    ctx.reporter.start(NAME, len(ways) * len(found) * ctx.settings.rounds)
    results: dict[str, dict[str, Any]] = {way: {} for way in WAYS}
    for way in ways:
        for processes, threads in found:
            window = {
                "whole": "whole window",
                "engine": "the engine's windows",
                "faster-whisper": "faster-whisper's transcribe",
            }[way]
            ctx.reporter.step(f"{processes} process(es) x {threads} thread(s), {window}")
            results[way][f"{processes}x{threads}"] = measure_layout(ctx, processes, threads, way)
    if same:
        results["engine"] = results["whole"]
    best = max(results["whole"], key=lambda key: results["whole"][key]["throughput"])
    best_short = max(results["engine"], key=lambda key: results["engine"][key]["throughput"])
    yardstick = results["faster-whisper"]
    best_fw = max(yardstick, key=lambda key: yardstick[key]["throughput"])
    ctx.shared["direct_best"] = results["whole"][best]["throughput"]
    ctx.shared["direct_best_short"] = results["engine"][best_short]["throughput"]
    ctx.shared["faster_whisper_best"] = yardstick[best_fw]["throughput"]
    return {
        "mix": "real",
        "layouts": results["whole"],
        "best": best,
        "best_throughput": results["whole"][best]["throughput"],
        "short_layouts": results["engine"],
        "best_short": best_short,
        "best_short_throughput": results["engine"][best_short]["throughput"],
        "engine_decodes_as_whole": same,
        "faster_whisper_layouts": yardstick,
        "faster_whisper_best": best_fw,
        "faster_whisper_best_throughput": yardstick[best_fw]["throughput"],
    }
