"""``cold``: time from starting ``byoa-skills serve`` to ``/ready``, and the first call's
latency against the warm median of the same clip."""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

import aiohttp

from byoa_skills.bench.context import Context
from byoa_skills.bench.scenarios import enginerun
from byoa_skills.bench.stats import summarize

NAME = "cold"
TITLE = "Cold start"


def run(ctx: Context) -> dict[str, Any]:
    """Start to ready (each start), first call and warm median (1 s clip)."""
    starts = ctx.settings.cold_starts
    warm_calls = max(3, ctx.settings.repeats)
    ctx.reporter.start(NAME, starts)
    body = enginerun.bodies(ctx)["1s"]
    ready_s: list[float] = []
    first_s: list[float] = []
    warm_s: list[float] = []
    for index in range(starts):
        ctx.reporter.step(f"start {index + 1} of {starts}")
        engine = enginerun.start(ctx, "cpu", log_name=f"serve-cold-{index}.log")
        ready_s.append(engine.wait_ready())

        async def calls(engine: Any = engine) -> list[float]:
            async with aiohttp.ClientSession() as session:
                return [(await engine.call(session, body)).waited for _ in range(warm_calls + 1)]

        waited = asyncio.run(calls())
        first_s.append(waited[0])
        warm_s.extend(waited[1:])
        if index < starts - 1:
            engine.stop()
        else:
            ctx.shared["engine:cpu"] = engine  # kept up for the engine and memory scenarios
        ctx.reporter.advance()
    warm_median = statistics.median(warm_s)
    return {
        "start_to_ready_s": summarize(ready_s).to_dict(),
        "first_call_s": summarize(first_s).to_dict(),
        "warm_s": summarize(warm_s).to_dict(),
        "warm_median_s": warm_median,
        "first_vs_warm": statistics.median(first_s) / warm_median,
        "clip": "1s",
    }
