"""``memory``: resident memory of each worker (pids from ``/ready``) and of the front process,
now and at its peak, and each worker's now split into its own memory and mapped files' pages;
where the workers' encoder runs on OpenVINO, the same figures of an engine whose workers run
CTranslate2 alone (``--encoder-backend ctranslate2``), measured in the same run after the same
calls, the ratio of the two largest peaks and that of each worker's peak to the one of the
same rank.

Each side is an engine started for this scenario, after the run's engine has built the files
derived from the model (the OpenVINO graphs, CTranslate2's decoder-only model): a worker that
builds them holds the model's weights for a while, once per installation, which is not what a
warm worker holds; and a fresh engine's peak is that of its start and these calls alone, not
of whatever the run's engine answered before."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from byoa_skills.bench.context import Context
from byoa_skills.bench.scenarios import enginerun
from byoa_skills.bench.server import EngineProcess, rss_mib
from byoa_skills.pool.memory import peak_rss_mib, resident_split_mib

NAME = "memory"
TITLE = "Memory"
#: The calls each engine answers before it is measured: the mixed real clips, one at a time,
#: then two at once (so each worker's peak includes its encoder on a whole window).
CALLS = 8


def run(ctx: Context) -> dict[str, Any]:
    """VmRSS and VmHWM in MiB of an engine started for this measure, read after it has
    answered calls; with an OpenVINO encoder, those of a CTranslate2-only engine beside them."""
    ctx.reporter.start(NAME, 3)
    enginerun.running(ctx, "cpu")  # its start builds the derived files, when none has
    ctx.reporter.advance()
    ctx.reporter.step("an engine started for this measure")
    figures = _measured_fresh(ctx, "serve-memory.log", ())
    ctx.reporter.advance()
    if figures["encoder"].startswith("openvino"):
        ctx.reporter.step("an engine with CTranslate2's encoder alone, for comparison")
        base = _measured_fresh(ctx, "serve-ctranslate2.log", ("--encoder-backend", "ctranslate2"))
        del base["encoder"]
        figures["ctranslate2_alone"] = base
        peak = figures["worker_peak_max_mib"]
        figures["peak_vs_ctranslate2"] = peak / base["worker_peak_max_mib"] if peak else None
        figures["peaks_vs_ctranslate2"] = ranked_ratios(
            figures["worker_peak_mib"], base["worker_peak_mib"]
        )
    ctx.reporter.advance()
    return figures


def _measured_fresh(ctx: Context, log_name: str, extra: tuple[str, ...]) -> dict[str, Any]:
    """The figures of an engine of the run's layout started now with ``extra`` flags, after
    it has answered the calls; the engine is stopped after."""
    engine = enginerun.start(ctx, "cpu", log_name=log_name, extra=extra)
    try:
        engine.wait_ready()
        _answer_calls(ctx, engine)
        figures = _measured(engine)
        health = engine.health()
        figures["encoder"] = health.get("encoder", "")
        figures["vad"] = health.get("vad", "")
    finally:
        engine.stop()
    return figures


def _answer_calls(ctx: Context, engine: EngineProcess) -> None:
    payloads = enginerun.bodies(ctx)
    labels = ctx.real_mix(CALLS)

    async def go() -> None:
        async with aiohttp.ClientSession() as session:
            for label in labels:
                await engine.call(session, payloads[label])
            for first, second in zip(labels[::2], labels[1::2], strict=False):
                await asyncio.gather(
                    engine.call(session, payloads[first]), engine.call(session, payloads[second])
                )

    asyncio.run(go())


def ranked_ratios(ours: dict[str, float], theirs: dict[str, float]) -> list[float] | None:
    """Each of ``ours`` over the one of ``theirs`` of the same rank, largest first (the worker
    that holds the lone call's encoder against its like); None where the counts differ or a
    figure is missing."""
    mine, others = sorted(ours.values(), reverse=True), sorted(theirs.values(), reverse=True)
    if len(mine) != len(others) or not all(mine) or not all(others):
        return None
    return [round(a / b, 3) for a, b in zip(mine, others, strict=True)]


def _measured(engine: EngineProcess) -> dict[str, Any]:
    pids = engine.workers()
    workers = {str(pid): round(rss_mib(pid), 1) for pid in pids}
    peaks = {str(pid): round(peak_rss_mib(pid) or 0.0, 1) for pid in pids}
    front = round(rss_mib(engine.process.pid), 1)
    split = {str(pid): resident_split_mib(pid) for pid in pids}
    values = list(workers.values())
    return {
        "worker_rss_mib": workers,
        "worker_rss_max_mib": max(values) if values else None,
        "worker_peak_mib": peaks,
        "worker_peak_max_mib": max(peaks.values()) if peaks else None,
        "worker_resident_mib": {
            pid: {kind: round(mib, 1) for kind, mib in kinds.items()}
            for pid, kinds in split.items()
            if kinds
        },
        "front_rss_mib": front,
        "total_rss_mib": round(front + sum(values), 1),
    }
