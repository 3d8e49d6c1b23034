"""``batch``: the engine with and without batching across calls (in length groups), in the
layouts that fit the cores, with the whole 30 s encoder window and with the first 15 s only
(the default). For each: latency at
concurrency 1 by clip length, and throughput with 8 calls in flight for 1 s, 5 s and 15 s
clips and their mix, next to "direct best" (the runtime called directly, one clip at a time,
in its best layout)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from byoa_skills.bench.clips import LABELS, mix
from byoa_skills.bench.context import Context
from byoa_skills.bench.load import by_clip, saturate
from byoa_skills.bench.scenarios import enginerun
from byoa_skills.bench.server import start_engine

NAME = "batch"
TITLE = "Batching across calls and the short encoder"
#: Calls in flight while throughput is measured.
IN_FLIGHT = 8


def configurations(ctx: Context) -> list[dict[str, Any]]:
    """The engine set-ups compared: ``workers``, ``threads``, ``batch``, ``encoder``."""
    cores = ctx.cores
    every = [
        (ctx.workers, 1, 1, 30.0),
        (ctx.workers, 1, 4, 30.0),
        (1, cores, 4, 30.0),
        (1, cores, 8, 30.0),
        (ctx.workers, 1, 1, 15.0),
        (ctx.workers, 1, 4, 15.0),
        (1, cores, 8, 15.0),
    ]
    if ctx.settings.quick:
        every = [every[0], every[6]]  # the default unbatched; one process batching, short window
    unique = list(dict.fromkeys(every))
    return [dict(zip(("workers", "threads", "batch", "encoder"), c, strict=True)) for c in unique]


def key_of(config: dict[str, Any]) -> str:
    """A short name: ``2x1 b4 enc15``."""
    return f"{config['workers']}x{config['threads']} b{config['batch']} enc{config['encoder']:g}"


def run(ctx: Context) -> dict[str, Any]:
    """Each configuration's figures and its throughput against direct best."""
    configs = configurations(ctx)
    sets = {"mix": mix(ctx.clips, ctx.settings.calls)} | {
        label: [label] * max(IN_FLIGHT, ctx.settings.calls // 2) for label in LABELS
    }
    ctx.reporter.start(NAME, len(configs) * (len(LABELS) * ctx.settings.rounds + len(sets)))
    payloads = enginerun.bodies(ctx)
    results: dict[str, Any] = {}
    for config in configs:
        name = key_of(config)
        ctx.reporter.step(f"starting {name}")
        extra = ("--max-batch", str(config["batch"]), "--encoder-seconds", str(config["encoder"]))
        engine = start_engine(
            ctx.home,
            ctx.settings.model,
            workers=config["workers"],
            threads=config["threads"],
            log_name="batch.log",
            extra=extra,
        )
        try:
            engine.wait_ready()
            results[name] = {**config, **asyncio.run(_measure(ctx, engine, payloads, sets))}
        finally:
            engine.stop()
    best = ctx.shared.get("direct_best")
    for figures in results.values():
        figures["vs_direct_best"] = figures["throughput"]["mix"] / best if best else None
    plain = key_of({"workers": ctx.workers, "threads": 1, "batch": 1, "encoder": 30.0})
    for figures in results.values():
        base = results[plain]
        figures["latency_vs_unbatched"] = {
            label: figures["latency_s"][label]["p50"] / base["latency_s"][label]["p50"]
            for label in LABELS
        }
    top = max(results, key=lambda name: results[name]["throughput"]["mix"])
    return {"configs": results, "direct_best": best, "best": top, "in_flight": IN_FLIGHT}


async def _measure(
    ctx: Context, engine: Any, payloads: dict[str, bytes], sets: dict[str, list[str]]
) -> dict[str, Any]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def call(label: str) -> float:
            return (await engine.call(session, payloads[label])).waited

        await call("1s")  # a first call on a fresh engine is not counted
        latency = await by_clip(
            call, LABELS, ctx.settings.repeats, ctx.settings.rounds, ctx.reporter.advance
        )
        throughput = {}
        for name, labels in sets.items():
            throughput[name], _ = await saturate(call, labels, IN_FLIGHT)
            ctx.reporter.advance()
    return {"latency_s": latency, "throughput": throughput}
