"""``tune``: choose the engine's layout for this machine and keep it in the user's config.

Each candidate (processes x threads that fit the cores, each unbatched and with batches of
:data:`BATCH` in length groups) runs as a real ``serve`` on the run's model: the mixed clips
one at a time (the latency a lone site sees), then with twice the cores in flight (the
throughput). The candidate with the most throughput wins; one within :data:`TIE` of it with a
lower latency one at a time wins instead. ``serve`` starts with the winner from then on when
its flags leave the layout out (:mod:`byoa_skills.pool.tuned`). Runs only when named.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from byoa_skills.bench.clips import mix
from byoa_skills.bench.context import Context
from byoa_skills.bench.load import saturate
from byoa_skills.bench.scenarios import enginerun
from byoa_skills.bench.scenarios.direct import layouts
from byoa_skills.bench.server import start_engine
from byoa_skills.bench.stats import summarize
from byoa_skills.pool.tuned import TunedLayout, layout_name, write_tuned

NAME = "tune"
TITLE = "The layout for this machine"
#: The batch size tried beside one call at a time.
BATCH = 4
#: Throughputs this close to the best count as equal; the lower latency then decides.
TIE = 0.05


def candidates(cores: int, quick: bool) -> list[tuple[int, int, int]]:
    """``(workers, threads, batch)`` to measure: each layout that fits the cores, unbatched
    and batched (quick: unbatched only)."""
    batches = (1,) if quick else (1, BATCH)
    return [(p, t, b) for p, t in layouts(cores) for b in batches]


def choose(figures: dict[str, dict[str, Any]]) -> str:
    """The winning candidate's key: the most throughput, or, among those within :data:`TIE`
    of it, the lowest p50 latency one call at a time."""
    top = max(f["throughput"] for f in figures.values())
    close = [k for k, f in figures.items() if f["throughput"] >= top * (1 - TIE)]
    return min(close, key=lambda key: figures[key]["latency_c1_s"]["p50"])


def run(ctx: Context) -> dict[str, Any]:
    """Each candidate's figures, the winner, and where it was kept."""
    if ctx.settings.device != "cpu":
        ctx.reporter.note("tune: measures the CPU layouts; a GPU runs one worker")
    found = candidates(ctx.cores, ctx.settings.quick)
    ctx.reporter.start(NAME, len(found))
    payloads = enginerun.bodies(ctx)
    labels = mix(ctx.clips, max(ctx.settings.calls, 4 * ctx.cores))
    figures: dict[str, dict[str, Any]] = {}
    for workers, threads, batch in found:
        key = layout_name(workers, threads, batch)
        ctx.reporter.step(f"serve {key}")
        engine = start_engine(
            ctx.home,
            ctx.settings.model,
            workers=workers,
            threads=threads,
            log_name="tune.log",
            extra=("--max-batch", str(batch)),
        )
        try:
            engine.wait_ready()
            measured = asyncio.run(_measure(engine, payloads, labels, 2 * ctx.cores))
        finally:
            engine.stop()
        figures[key] = {"workers": workers, "threads": threads, "batch": batch, **measured}
        ctx.reporter.advance()
    best = choose(figures)
    chosen = figures[best]
    layout = TunedLayout(
        workers=chosen["workers"],
        threads=chosen["threads"],
        max_batch=chosen["batch"],
        cores=ctx.cores,
        figures={
            key: {"throughput": f["throughput"], "latencyC1P50": f["latency_c1_s"]["p50"]}
            for key, f in figures.items()
        },
    )
    kept = write_tuned(ctx.settings.model, "cpu", layout, ctx.layout_path)
    ctx.reporter.note(f"tune: chose {layout.describe()} for {ctx.settings.model}; kept in {kept}")
    return {"candidates": figures, "best": best, "kept_in": str(kept), "model": ctx.settings.model}


async def _measure(
    engine: Any, payloads: dict[str, bytes], labels: list[str], in_flight: int
) -> dict[str, Any]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def call(label: str) -> float:
            return (await engine.call(session, payloads[label])).waited

        await call("1s")  # a first call on a fresh engine is not counted
        one_at_a_time = [await call(label) for label in labels]
        throughput, _ = await saturate(call, labels, in_flight)
    return {
        "latency_c1_s": summarize(one_at_a_time).to_dict(),
        "throughput": throughput,
        "in_flight": in_flight,
    }
