"""``engine``: ``byoa-skills serve`` on loopback, called over HTTP as the wallet calls it:
latency by clip length and by real clip group (with its ratio to the ``floor``), the API's
overhead per call, and a concurrency sweep over the mixed real clips from 1 to twice the
workers, with each level's phase split (where a call's time goes), the ratio of the throughput
at 2 calls to that at 1, and the ratio of its best throughput to "faster-whisper direct"
(faster-whisper called as a user calls it), to "direct best" (the runtime in-process, the
whole window) and to "direct best, short windows" (the engine's own decoding without the
pool). Where faster-whisper direct was measured it also says what a call may keep a worker
busy for the engine to be :data:`GOAL_VS_FASTER_WHISPER` times as fast, against what the calls
at as many calls in flight as workers took, and what that leaves the encoder."""

from __future__ import annotations

from typing import Any

from byoa_skills.bench.context import Context
from byoa_skills.bench.phases import goal_budget
from byoa_skills.bench.scenarios import enginerun

NAME = "engine"
TITLE = "Engine over the local API"
#: The engine's throughput goal, in times faster-whisper direct's.
GOAL_VS_FASTER_WHISPER = 2.5


def run(ctx: Context) -> dict[str, Any]:
    """The engine's figures on the CPU."""
    workers, threads = enginerun.engine_layout(ctx, "cpu")
    ctx.reporter.start(NAME, enginerun.work_units(ctx, workers))
    engine = enginerun.running(ctx, "cpu")
    figures = enginerun.measure(ctx, engine, workers)
    figures["threads"] = threads
    figures["worker_pids"] = engine.workers()
    best = ctx.shared.get("direct_best")
    figures["direct_best"] = best
    figures["vs_direct_best"] = figures["best_throughput"] / best if best else None
    short = ctx.shared.get("direct_best_short")
    figures["direct_best_short"] = short
    figures["vs_direct_best_short"] = figures["best_throughput"] / short if short else None
    yardstick = ctx.shared.get("faster_whisper_best")
    figures["faster_whisper_best"] = yardstick
    figures["vs_faster_whisper"] = figures["best_throughput"] / yardstick if yardstick else None
    full = [split for split in figures["phase_split"] if split["concurrency"] == workers]
    figures["goal_budget"] = (
        goal_budget(full[0], workers=workers, yardstick=yardstick, goal=GOAL_VS_FASTER_WHISPER)
        if full and yardstick
        else None
    )
    floor = ctx.shared.get("floor", {})
    figures["vs_floor"] = {
        name: stats["p50"] / floor[name]
        for name, stats in figures["group_latency_s"].items()
        if floor.get(name)
    }
    return figures
