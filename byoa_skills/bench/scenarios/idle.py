"""``idle``: what an idle engine costs and how fast it comes back. An engine with a short
``--idle-release`` lets its workers go; then: the resident memory of the whole engine (the
front process and whatever children it still has), the time from a grant to its answer
(the engine answers a grant with ``audio.transcribe`` once the workers are warm again), and
the first call after that against the warm median of the same clip."""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import aiohttp

from byoa_skills.bench.context import Context
from byoa_skills.bench.scenarios import enginerun
from byoa_skills.bench.server import EngineProcess, grant_request, rss_mib
from byoa_skills.bench.stats import summarize

NAME = "idle"
TITLE = "Idle release and warm-up"
#: The idle time of the measured engine, in seconds (the engine's default is 600).
IDLE_SECONDS = 2.0
MANIFEST = {
    "byoa": "0.1-draft",
    "purpose": {"summary": "An idle-engine benchmark"},
    "skills": {"audio.transcribe": {"required": True}},
    "privacy": "personal",
    "expectedCost": {"perSession": "1 USD"},
}


def tree_rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` and all its descendants, in MiB."""
    total, pending = 0.0, [pid]
    while pending:
        current = pending.pop()
        total += rss_mib(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                pending += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
    return total


def run(ctx: Context) -> dict[str, Any]:
    """Idle RSS of the whole engine, grant to warm, first call after warm-up / warm median."""
    rounds = max(1, min(3, ctx.settings.repeats))
    ctx.reporter.start(NAME, rounds)
    workers = enginerun.engine_layout(ctx, "cpu")[0]
    engine = enginerun.start(
        ctx, "cpu", log_name="serve-idle.log", extra=("--idle-release", f"{IDLE_SECONDS:g}")
    )
    try:
        engine.wait_ready()
        warm_rss = tree_rss_mib(engine.process.pid)
        body = enginerun.bodies(ctx)["1s"]
        idle_rss: list[float] = []
        to_warm: list[float] = []
        first: list[float] = []
        warm: list[float] = []
        for index in range(rounds):
            ctx.reporter.step(f"round {index + 1} of {rounds}: idle, grant, calls")
            idle_rss.append(_wait_until_let_go(engine))
            figures = asyncio.run(_grant_then_calls(engine, body, ctx.settings.repeats))
            to_warm.append(figures["grant_s"])
            first.append(figures["first_s"])
            warm += figures["warm_s"]
            ctx.reporter.advance()
    finally:
        engine.stop()
    warm_median = statistics.median(warm)
    return {
        "idle_release_s": IDLE_SECONDS,
        "workers": workers,
        "warm_rss_mib": round(warm_rss, 1),
        "idle_rss_mib": round(max(idle_rss), 1),
        "grant_to_warm_s": summarize(to_warm).to_dict(),
        "first_call_s": summarize(first).to_dict(),
        "warm_median_s": warm_median,
        "first_vs_warm": statistics.median(first) / warm_median,
    }


def _wait_until_let_go(engine: EngineProcess) -> float:
    """Wait until the workers are let go and their processes have ended; the engine's RSS."""
    limit = time.monotonic() + 300
    while engine.warm() or engine.workers():
        if time.monotonic() > limit:
            raise RuntimeError("the workers were not let go within 300 s")
        time.sleep(0.1)
    return tree_rss_mib(engine.process.pid)


async def _grant_then_calls(engine: EngineProcess, body: bytes, repeats: int) -> dict[str, Any]:
    request = grant_request("https://idle.example", MANIFEST, ["audio.transcribe"])
    headers = {"Authorization": f"Bearer {engine.token}"}
    async with aiohttp.ClientSession() as session:
        began = time.perf_counter()
        async with session.post(f"{engine.url}/v1/grants", json=request, headers=headers) as answer:
            granted = await answer.json()
        grant_s = time.perf_counter() - began
        if not granted.get("ok"):
            raise RuntimeError(f"the grant was refused: {granted}")
        first = (await engine.call(session, body)).waited
        warm = [(await engine.call(session, body)).waited for _ in range(max(3, repeats))]
    return {"grant_s": grant_s, "first_s": first, "warm_s": warm}
