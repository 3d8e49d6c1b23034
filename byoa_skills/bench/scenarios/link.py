"""``link``: end to end through the reference site and the direct link. The site's server
sends ``call`` frames to the wallet's WebSocket (the engine took the site's link, with the
developer switch for ``ws://localhost``); latency by clip length and a concurrency sweep,
timed at the site, next to the same engine over its local API."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from byoa_skills.bench.clips import LABELS, mix, skill_body
from byoa_skills.bench.context import Context, Skip
from byoa_skills.bench.load import by_clip, sweep
from byoa_skills.bench.scenarios import enginerun
from byoa_skills.demos.site import GEO_MANIFEST, start_site
from byoa_skills.wallet_shim.limits import MAX_CALLS_PER_MINUTE

NAME = "link"
TITLE = "Direct link, site to wallet"

#: The geography game's manifest with room for a benchmark's call rate (its own 40 calls a
#: minute would refuse most of the sweep).
BENCH_MANIFEST = {
    **GEO_MANIFEST,
    "purpose": {
        **GEO_MANIFEST["purpose"],
        "limits": {"maxClipSeconds": 15, "maxCallsPerMinute": MAX_CALLS_PER_MINUTE},
    },
}


def run(ctx: Context) -> dict[str, Any]:
    """The direct link's figures with the run's engine."""
    workers, _ = enginerun.engine_layout(ctx, "cpu")
    levels = ctx.sweep(workers)
    ctx.reporter.start(NAME, ctx.settings.rounds * (len(LABELS) + len(levels)))
    engine = enginerun.running(ctx, "cpu")
    inputs = {label: skill_body(ctx.clips[label]) for label in LABELS}

    async def go() -> dict[str, Any]:
        runner, _, demo = await start_site(host="localhost", manifest=BENCH_MANIFEST)
        try:
            session, link = demo.new_code("127.0.0.1")
            headers = {"Authorization": f"Bearer {engine.token}"}
            async with (
                aiohttp.ClientSession() as http,
                http.post(
                    f"{engine.url}/v1/links",
                    json={"link": link, "decision": "allow"},
                    headers=headers,
                ) as response,
            ):
                answer = await response.json()
            if not answer.get("ok"):
                raise Skip(f"the engine did not take the link: {answer.get('code')}")

            async def call(label: str) -> float:
                began = asyncio.get_running_loop().time()
                body = inputs[label]
                result = await demo.call(
                    session, "audio.transcribe", body["input"], body["params"], timeout=120
                )
                if result is None:
                    raise RuntimeError("the wallet refused or did not answer a call")
                return asyncio.get_running_loop().time() - began

            ctx.reporter.step("latency by clip length")
            latency = await by_clip(
                call, LABELS, ctx.settings.repeats, ctx.settings.rounds, ctx.reporter.advance
            )
            ctx.reporter.step(f"concurrency sweep {list(levels)}")
            levels_out = await sweep(
                call,
                mix(ctx.clips, ctx.settings.calls),
                levels,
                ctx.settings.rounds,
                ctx.reporter.advance,
            )
            limit = demo.connections[0].max_parallel_calls if demo.connections else None
        finally:
            await demo.close()
            await runner.cleanup()
        return {
            "latency_s": latency,
            "sweep": [level.to_dict() for level in levels_out],
            "max_parallel_calls": limit,
        }

    figures = asyncio.run(go())
    top = max(figures["sweep"], key=lambda level: level["throughput"])
    figures["best_throughput"] = top["throughput"]
    figures["best_concurrency"] = top["concurrency"]
    return figures
