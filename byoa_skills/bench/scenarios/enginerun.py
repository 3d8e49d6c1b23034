"""The engine measurements that the ``engine`` and ``gpu`` scenarios share, and the engine
process a run keeps up between scenarios."""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

import aiohttp

from byoa_skills.bench.clips import LABELS, skill_body
from byoa_skills.bench.context import Context
from byoa_skills.bench.load import by_clip, by_group, sweep
from byoa_skills.bench.phases import phase_split
from byoa_skills.bench.server import EngineProcess, Timed, json_body, start_engine
from byoa_skills.bench.stats import summarize


def engine_layout(ctx: Context, device: str) -> tuple[int, int]:
    """``(workers, threads)``: one single-threaded worker per core on the CPU, one on CUDA."""
    return (1, 1) if device == "cuda" else (ctx.workers, 1)


def start(
    ctx: Context,
    device: str = "cpu",
    log_name: str = "serve.log",
    extra: tuple[str, ...] = (),
) -> EngineProcess:
    """Start an engine of the run's layout on ``device``, with ``extra`` flags to ``serve``
    (stopped when the run ends, if not before); does not wait for ready."""
    workers, threads = engine_layout(ctx, device)
    engine = start_engine(
        ctx.home,
        ctx.settings.model,
        workers=workers,
        threads=threads,
        device=device,
        log_name=log_name,
        extra=extra,
    )
    ctx.cleanups.append(engine.stop)
    return engine


def running(ctx: Context, device: str = "cpu") -> EngineProcess:
    """The run's ready engine on ``device``, started now if no scenario has started one."""
    key = f"engine:{device}"
    engine = ctx.shared.get(key)
    if engine is None or engine.process.poll() is not None:
        engine = start(ctx, device)
        ctx.reporter.step(f"starting byoa-skills serve ({device})")
        engine.wait_ready()
        ctx.shared[key] = engine
    return engine


def bodies(ctx: Context) -> dict[str, bytes]:
    """The JSON body of a call for each clip (the 1 s / 5 s / 15 s labels and the real
    clips' keys), in its language."""
    return {
        key: json_body(skill_body(samples, ctx.language(key))) for key, samples in ctx.clips.items()
    }


def groups(ctx: Context) -> dict[str, list[str]]:
    """The keys of the real clips by length group."""
    return {name: [clip.key for clip in clips] for name, clips in ctx.real.items()}


def measure(ctx: Context, engine: EngineProcess, workers: int) -> dict[str, Any]:
    """Latency and API overhead by clip length, then the concurrency sweep."""
    payloads = bodies(ctx)
    levels = ctx.sweep(workers)
    settings = ctx.settings

    async def go() -> dict[str, Any]:
        timed: dict[str, list[Timed]] = {key: [] for key in payloads}
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def call(label: str) -> float:
                result = await engine.call(session, payloads[label])
                timed[label].append(result)
                return result.waited

            ctx.reporter.step("latency by clip length")
            latency = await by_clip(
                call, LABELS, settings.repeats, settings.rounds, ctx.reporter.advance
            )
            overhead = {
                label: summarize([t.overhead * 1000 for t in timed[label]]).to_dict()
                for label in LABELS
            }
            infer = {
                label: summarize([t.infer for t in timed[label]]).to_dict() for label in LABELS
            }
            ctx.reporter.step("latency by clip group, the real clips one at a time")
            real_groups = groups(ctx)
            before = {key: len(calls) for key, calls in timed.items()}
            by_groups = await by_group(
                call, real_groups, settings.repeats, settings.rounds, ctx.reporter.advance
            )
            by_window = group_latency_by_window(
                real_groups,
                {key: calls[before[key] :] for key, calls in timed.items()},
                {clip.key: clip.language for clips in ctx.real.values() for clip in clips},
            )
            ctx.reporter.step(f"concurrency sweep {list(levels)}")
            levels_out, splits = [], []
            for level in levels:
                before = {key: len(calls) for key, calls in timed.items()}
                levels_out += await sweep(
                    call,
                    ctx.real_mix(settings.calls),
                    [level],
                    settings.rounds,
                    ctx.reporter.advance,
                )
                made = [t for key, calls in timed.items() for t in calls[before[key] :]]
                splits.append({"concurrency": level, **phase_split(made)})
        return {
            "latency_s": latency,
            "group_latency_s": by_groups,
            "group_latency_by_window_s": by_window,
            "infer_s": infer,
            "overhead_ms": overhead,
            "sweep": [level.to_dict() for level in levels_out],
            "phase_split": splits,
        }

    figures = asyncio.run(go())
    top = max(figures["sweep"], key=lambda level: level["throughput"])
    rates = {level["concurrency"]: level["throughput"] for level in figures["sweep"]}
    figures["c2_vs_c1"] = rates[2] / rates[1] if rates.get(1) and rates.get(2) else None
    figures["workers"] = workers
    figures["best_throughput"] = top["throughput"]
    figures["best_concurrency"] = top["concurrency"]
    return figures


def group_latency_by_window(
    groups: dict[str, list[str]], timed: dict[str, list[Timed]], languages: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """Per clip group, the calls' latency split by the window that answered them: ``"short"``
    (under 30 s) and ``"whole"`` (30 s), each with its calls, p50 and the languages of its
    clips, so a group's p50 can be read against the languages that keep the whole window."""
    out: dict[str, dict[str, Any]] = {}
    for name, keys in groups.items():
        split: dict[str, list[float]] = {"short": [], "whole": []}
        spoken: dict[str, set[str]] = {"short": set(), "whole": set()}
        for key in keys:
            for result in timed.get(key, []):
                if result.window is None:
                    continue
                side = "whole" if result.window >= 30.0 else "short"
                split[side].append(result.waited)
                spoken[side].add(languages.get(key, "?"))
        out[name] = {
            side: {
                "calls": len(values),
                "p50": statistics.median(values),
                "languages": sorted(spoken[side]),
            }
            for side, values in split.items()
            if values
        }
    return out


def work_units(ctx: Context, workers: int) -> int:
    """Progress units of :func:`measure`."""
    return ctx.settings.rounds * (len(LABELS) + len(ctx.real) + len(ctx.sweep(workers)))
