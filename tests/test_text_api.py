"""text.generate end to end: the real engine (a ``serve`` process), its local API and the
direct link, with a real chat model on llama.cpp's server and the Ollama-format server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from engine import TOKEN, Engine, call_http, call_ws
from fake_sources import RunningServer, ollama_app, serving
from grants import GEO_MANIFEST, grant
from llama import LlamaServer
from textkit import sources_file, wait_for

from byoa_skills.demos.site.app import start_site
from byoa_skills.demos.site.demo import SiteDemo

QUESTION = {"messages": [{"role": "user", "content": "Name one country in South America."}]}
ORIGIN = "https://quiz.example.org"


@pytest.fixture(scope="module")
def ollama() -> Iterator[RunningServer]:
    with serving(ollama_app) as server:
        yield server


@pytest.fixture(scope="module")
def sources(engine: Engine, llama: LlamaServer, ollama: RunningServer) -> Iterator[Path]:
    """The engine's sources file: the real model and the Ollama-format server."""
    path = sources_file(
        engine.home / "config" / "sources.json",
        {"name": "llama", "kind": "openai", "url": llama.url},
        {"name": "ollama", "kind": "ollama", "url": ollama.url},
    )
    yield path
    path.unlink()


def api(engine: Engine, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    async def run() -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            aiohttp.ClientSession() as session,
            session.request(method, engine.url + path, json=body, headers=headers) as response,
        ):
            return response.status, await response.json()

    return asyncio.run(run())


def new_grant(engine: Engine, **changes: Any) -> str:
    status, answer = api(
        engine,
        "POST",
        "/v1/grants",
        {
            "origin": ORIGIN,
            "manifest": GEO_MANIFEST,
            "grant": grant(**changes),
        },
    )
    assert status == 200, answer
    return answer["grantId"]


def text_call(call_id: int, grant_id: str | None, **params: Any) -> dict[str, Any]:
    frame = {
        "type": "call",
        "id": call_id,
        "skill": "text.generate",
        "input": QUESTION,
        "params": {"temperature": 0, **params},
    }
    if grant_id:
        frame["grantId"] = grant_id
    return frame


def test_streamed_chunks_come_before_the_result_and_make_its_text(
    engine: Engine, sources: Path
) -> None:
    grant_id = new_grant(engine, models={"m1": "llama/smollm2"})

    async def run() -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(f"{engine.url}/v1/ws", headers=headers) as ws,
        ):
            await ws.send_json(text_call(1, grant_id, model="m1", stream=True, maxTokens=16))
            while not got or got[-1]["type"] != "result":
                got.append(json.loads((await ws.receive(timeout=120)).data))
        return got

    got = asyncio.run(run())
    chunks, result = got[:-1], got[-1]
    assert result["ok"] is True, result
    assert len(chunks) > 3 and all(c["type"] == "chunk" and c["id"] == 1 for c in chunks)
    assert "".join(c["text"] for c in chunks) == result["output"]["text"]
    assert result["receipt"] == {"cost": "0.000 USD", "provider": "local-model"}
    (whole,) = asyncio.run(call_ws(engine, [text_call(2, grant_id, model="m1", maxTokens=16)], 1))
    assert whole["type"] == "result" and whole["output"]["text"] == result["output"]["text"]


def test_the_grants_model_code_decides_the_model(engine: Engine, sources: Path) -> None:
    grant_id = new_grant(
        engine, models={"m1": "llama/smollm2", "m2": "llama/gpt-4o"}, limits={"maxAnswerTokens": 4}
    )
    answers = asyncio.run(
        call_ws(
            engine,
            [
                text_call(1, grant_id, model="m1"),
                text_call(2, grant_id, model="m2"),  # ticked, but the source does not have it
                text_call(3, grant_id, model="m3"),
                text_call(4, grant_id, model="llama/smollm2"),  # a name, not a code
                text_call(5, grant_id, model="m1", maxTokens=5),
            ],
            expect=5,
        )
    )
    by_id = {answer["id"]: answer for answer in answers}
    assert by_id[1]["ok"] is True and 0 < len(by_id[1]["output"]["text"].split()) <= 4
    assert by_id[2]["code"] == "unknown-model"
    assert by_id[3]["code"] == by_id[4]["code"] == "model-not-granted"
    assert by_id[5]["code"] == "answer-tokens-exceeded"


def test_the_wallets_own_calls_name_the_model_and_get_alternatives(
    engine: Engine, sources: Path
) -> None:
    body = {
        "input": QUESTION,
        "params": {"model": "llama/smollm2", "choices": 2, "maxTokens": 6, "temperature": 1.0},
    }
    status, answer = asyncio.run(call_http(engine, "text.generate", body))
    assert status == 200, answer
    assert len(answer["output"]["choices"]) == 2
    assert answer["output"]["text"] == answer["output"]["choices"][0]


def test_a_caller_that_goes_away_frees_its_slot_and_the_upstream_request(
    engine: Engine, sources: Path, ollama: RunningServer
) -> None:
    grant_id = new_grant(engine, models={"m1": "ollama/echo"}, limits={"maxParallelCalls": 1})
    slow = {"messages": [{"role": "user", "content": "la " * 100 + "#slow:0.05"}]}

    async def leave_after_the_first_chunk() -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(f"{engine.url}/v1/ws", headers=headers) as ws,
        ):
            await ws.send_json(
                {**text_call(1, grant_id, model="m1", stream=True, maxTokens=300), "input": slow}
            )
            return json.loads((await ws.receive(timeout=60)).data)

    cancelled = ollama.recorded.cancelled
    first = asyncio.run(leave_after_the_first_chunk())
    assert first["type"] == "chunk"
    assert wait_for(
        lambda: api(engine, "GET", f"/v1/grants/{grant_id}")[1]["record"]["inFlight"] == 0
    )
    assert wait_for(lambda: ollama.recorded.cancelled == cancelled + 1)
    (again,) = asyncio.run(call_ws(engine, [text_call(2, grant_id, model="m1", maxTokens=3)], 1))
    assert again["ok"] is True, again  # the one slot is free again


def test_a_source_that_is_down_and_one_that_fails_mid_stream(engine: Engine, sources: Path) -> None:
    broken = {"messages": [{"role": "user", "content": "a b c d #fail:midstream"}]}
    frames = [
        {**text_call(1, None, model="ollama/echo", stream=True), "input": broken},
        text_call(2, None, model="gone/model"),
    ]
    answers = asyncio.run(call_ws(engine, frames, expect=5))
    results = {a["id"]: a for a in answers if a["type"] == "result"}
    assert results[1]["code"] == "upstream-error"
    assert results[2]["code"] == "unknown-source"
    assert [a["text"] for a in answers if a["type"] == "chunk"] == ["a ", "b ", "c "]


@contextmanager
def default_model(path: Path, model: str) -> Iterator[None]:
    before = path.read_text()
    path.write_text(json.dumps({**json.loads(before), "default": model}))
    try:
        yield
    finally:
        path.write_text(before)


def test_the_direct_link_streams_chunk_frames(engine: Engine, sources: Path) -> None:
    manifest = json.loads(json.dumps(GEO_MANIFEST))
    manifest["skills"] = {"text.generate": {"required": True}}

    async def body(demo: SiteDemo) -> tuple[dict[str, Any] | None, list[str]]:
        session, link = demo.new_code("127.0.0.1")
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            aiohttp.ClientSession() as client,
            client.post(
                f"{engine.url}/v1/links", json={"link": link, "decision": "allow"}, headers=headers
            ) as response,
        ):
            assert (await response.json())["ok"]
        result = await demo.call(
            session,
            "text.generate",
            QUESTION,
            {"model": "m1", "stream": True, "maxTokens": 12, "temperature": 0},
        )
        connection = demo.connection(session)
        assert connection is not None
        return result, connection.chunks.get(demo._next_id, [])

    async def main() -> tuple[dict[str, Any] | None, list[str]]:
        runner, _, demo = await start_site(host="localhost", manifest=manifest)
        try:
            return await body(demo)
        finally:
            await demo.close()
            await runner.cleanup()

    with default_model(sources, "llama/smollm2"):
        result, chunks = asyncio.run(main())
    assert result is not None and result["ok"] is True
    assert len(chunks) > 3 and "".join(chunks) == result["output"]["text"]
    assert result["receipt"]["provider"] == "local-model"
