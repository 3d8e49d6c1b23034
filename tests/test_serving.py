"""The one serving loop of ``call`` frames (``protocol/serving.py``) over a real loopback
WebSocket, with the rules of each side that uses it: the wallet on the direct link and the
local API's ``/v1/ws``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web

from byoa_skills.directlink.client import _link_refusal
from byoa_skills.protocol import frames
from byoa_skills.protocol.serving import SendChunk, serve_calls


class Served:
    """A server whose one WebSocket is served by :func:`serve_calls` with ``rules``; each call
    streams one chunk, then waits for :attr:`release` and answers its input."""

    def __init__(self, **rules: Any) -> None:
        self.rules = rules
        self.release = asyncio.Event()
        self.over_bound: list[Any] = []
        self.ending: asyncio.Future[str] = asyncio.Future()

    async def answer(self, call: frames.Call, on_chunk: SendChunk) -> Mapping[str, Any]:
        await on_chunk(0, f"piece of {call.id}")
        await self.release.wait()
        return {"ok": True, "output": call.input, "receipt": {"cost": "0.000 USD"}}

    def refuse_over_bound(self, call: frames.Call) -> Mapping[str, Any]:
        self.over_bound.append(call.id)
        return {"ok": False}

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        ending = await serve_calls(ws, self.answer, over_bound=self.refuse_over_bound, **self.rules)
        self.ending.set_result(ending)
        return ws


async def talk(rules: dict[str, Any], script: Any, released: bool = False) -> Any:
    """Start a server served with ``rules`` and run ``script(ws, served)`` against it."""
    served = Served(**rules)
    if released:
        served.release.set()
    app = web.Application()
    app.router.add_get("/ws", served.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(f"http://127.0.0.1:{port}/ws")
            return await script(ws, served)
    finally:
        await runner.cleanup()


async def next_frame(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    message = await ws.receive(timeout=10)
    assert message.type == WSMsgType.TEXT, message
    return json.loads(message.data)


def call_text(call_id: int) -> str:
    return frames.encode(frames.call_frame(call_id, "s", {"n": call_id}, {}))


def test_the_links_rules_bound_ping_ignore_and_end_on_bye() -> None:
    rules = {"limit": 2, "refused": _link_refusal, "bye_ends": True, "ping_seconds": 0.05}

    async def script(
        ws: aiohttp.ClientWebSocketResponse, served: Served
    ) -> tuple[list[dict[str, Any]], str, list[Any]]:
        seen: list[dict[str, Any]] = []
        for call_id in (1, 2, 3):
            await ws.send_str(call_text(call_id))
        while not any(f.get("id") == 3 for f in seen) or not any(f["type"] == "ping" for f in seen):
            seen.append(await next_frame(ws))
        await ws.send_str("[1, 2]")  # refused bad-request: ignored
        await ws.send_str('{"type": "call", "id": true}')  # refused bad-request: ignored
        served.release.set()
        while sum(f["type"] == "result" for f in seen) < 3:
            seen.append(await next_frame(ws))
        await ws.send_str(frames.encode(frames.bye_frame()))
        return seen, await asyncio.wait_for(served.ending, 10), served.over_bound

    seen, ending, over_bound = asyncio.run(talk(rules, script))
    results = {f["id"]: f for f in seen if f["type"] == "result"}
    assert results[3] == {"type": "result", "id": 3, "ok": False}
    assert over_bound == [3]
    assert results[1]["output"] == {"n": 1} and results[2]["output"] == {"n": 2}
    chunks = [f for f in seen if f["type"] == "chunk"]
    assert chunks and {c["id"] for c in chunks} == {1, 2}
    first_result = min(i for i, f in enumerate(seen) if f["type"] == "result")
    assert seen[first_result]["id"] == 3, "the call over the bound is answered first"
    assert ending == "bye"


def test_the_links_rules_close_on_a_frame_that_is_not_json() -> None:
    rules = {"limit": 2, "refused": _link_refusal, "bye_ends": True}

    async def script(ws: aiohttp.ClientWebSocketResponse, served: Served) -> tuple[int | None, str]:
        await ws.send_str("NaN")
        message = await ws.receive(timeout=10)
        assert message.type == WSMsgType.CLOSE
        return ws.close_code, await asyncio.wait_for(served.ending, 10)

    assert asyncio.run(talk(rules, script)) == (1007, "malformed")


def test_the_local_apis_rules_answer_refusals_and_ignore_bye() -> None:
    def error_of(refused: frames.FrameError) -> frames.Error:
        return frames.error_frame(refused.code, refused.message)

    rules = {"limit": 64, "refused": error_of}

    async def script(
        ws: aiohttp.ClientWebSocketResponse, served: Served
    ) -> tuple[list[dict[str, Any]], str]:
        await ws.send_str(frames.encode(frames.bye_frame()))
        await ws.send_str("NaN")
        await ws.send_str(call_text(7))
        seen = [await next_frame(ws) for _ in range(3)]
        await ws.close()
        return seen, await asyncio.wait_for(served.ending, 10)

    seen, ending = asyncio.run(talk(rules, script, released=True))
    assert seen[0] == {"type": "error", "code": "not-json", "message": "the frame is not JSON"}
    assert seen[1] == {"type": "chunk", "id": 7, "text": "piece of 7"}
    assert seen[2]["type"] == "result" and seen[2]["output"] == {"n": 7}
    assert ending == "dropped"
