"""The local API: ``/health``, ``/ready``, ``/metrics``, ``POST /v1/skills/{skill}`` and the
WebSocket ``/v1/ws`` that speaks the direct link's ``call`` / ``result`` frames.

Only loopback Host names are served (a DNS-rebinding page gets nothing), a request from a
web page (one with an ``Origin``) is refused, and everything but the health checks needs
the bearer token.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import WSMsgType, web

from byoa_skills.skills import CallResult, SkillEngine

from .metrics import EngineMetrics

log = logging.getLogger("byoa_skills.api")

#: The largest frame or request body taken, as on the direct link.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
#: Frames up to this size are read and answered ``message-too-large``; larger ones close the
#: WebSocket (1009) without being read.
_READ_LIMIT_BYTES = 4 * MAX_MESSAGE_BYTES
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
OPEN_PATHS = frozenset({"/health", "/ready"})

#: HTTP status of a refused call, by code; any other refusal is 400 (bad input).
_STATUS_BY_CODE = {
    "unknown-skill": 404,
    "queue-full": 503,
    "shutting-down": 503,
    "skill-unavailable": 503,
    "deadline-exceeded": 504,
    "worker-crashed": 500,
    "transcribe-failed": 500,
}

ENGINE_KEY = web.AppKey("engine", SkillEngine)
METRICS_KEY = web.AppKey("metrics", EngineMetrics)
TOKEN_KEY = web.AppKey("token", str)


def build_app(engine: SkillEngine, metrics: EngineMetrics, token: str) -> web.Application:
    """The aiohttp application of the local API."""
    app = web.Application(
        middlewares=[_guard],
        client_max_size=MAX_MESSAGE_BYTES,
        handler_args={"max_field_size": 8190},
    )
    app[ENGINE_KEY] = engine
    app[METRICS_KEY] = metrics
    app[TOKEN_KEY] = token
    app.router.add_get("/health", _health)
    app.router.add_get("/ready", _ready)
    app.router.add_get("/metrics", _metrics)
    app.router.add_post("/v1/skills/{skill}", _call_over_http)
    app.router.add_get("/v1/ws", _websocket)
    return app


def refusal(status: int, code: str, message: str) -> web.Response:
    """A JSON refusal ``{"ok": false, "code", "message"}`` with an HTTP status."""
    return web.json_response({"ok": False, "code": code, "message": message}, status=status)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    if _host_name(request.host) not in LOOPBACK_HOSTS:
        return refusal(403, "forbidden-host", "only loopback host names are served")
    if "Origin" in request.headers:
        return refusal(403, "forbidden-origin", "requests from web pages are not served")
    if request.path not in OPEN_PATHS:
        expected = f"Bearer {request.app[TOKEN_KEY]}".encode()
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            return refusal(401, "unauthorized", "a valid bearer token is needed")
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return refusal(404, "not-found", f"nothing at {request.path[:80]}")
    except web.HTTPMethodNotAllowed:
        return refusal(405, "method-not-allowed", f"{request.method} is not allowed here")


def _host_name(host: str | None) -> str:
    if not host:
        return ""
    if host.startswith("["):
        return host[: host.find("]") + 1].lower()
    return host.rsplit(":", 1)[0].lower() if host.count(":") == 1 else host.lower()


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def _ready(request: web.Request) -> web.Response:
    engine = request.app[ENGINE_KEY]
    if engine.ready:
        return web.json_response({"ready": True, "workers": engine.pool.worker_pids()})
    return web.json_response({"ready": False}, status=503)


async def _metrics(request: web.Request) -> web.Response:
    body = request.app[METRICS_KEY].exposition()
    return web.Response(body=body, content_type="text/plain", charset="utf-8")


async def _call_over_http(request: web.Request) -> web.Response:
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return refusal(413, "message-too-large", f"the body is over {MAX_MESSAGE_BYTES} bytes")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return refusal(400, "not-json", "the body is not JSON")
    if not isinstance(body, dict):
        return refusal(400, "bad-request", "the body must be a JSON object")
    result = await request.app[ENGINE_KEY].call(
        request.match_info["skill"], body.get("input"), body.get("params"),
        body.get("deadlineSeconds"),
    )  # fmt: skip
    status = 200 if result.ok else _STATUS_BY_CODE.get(str(result.code), 400)
    return web.json_response(result.to_json(), status=status, headers=_server_timing(result))


def _server_timing(result: CallResult) -> dict[str, str]:
    """A ``Server-Timing`` header with the queue wait and the model's time, when known."""
    parts = [
        f"{name};dur={result.facts[key]}"
        for name, key in (("queue", "queued_ms"), ("infer", "infer_ms"))
        if key in result.facts
    ]
    return {"Server-Timing": ", ".join(parts)} if parts else {}


async def _websocket(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(max_msg_size=_READ_LIMIT_BYTES, heartbeat=None)
    await ws.prepare(request)
    engine = request.app[ENGINE_KEY]
    sending = asyncio.Lock()
    calls: set[asyncio.Task[None]] = set()

    async def send(frame: dict[str, Any]) -> None:
        async with sending:
            if not ws.closed:
                await ws.send_str(json.dumps(frame))

    async def answer(frame: dict[str, Any]) -> None:
        result = await engine.call(
            frame.get("skill"), frame.get("input"), frame.get("params"),
            frame.get("deadlineSeconds"),
        )  # fmt: skip
        await send({"type": "result", "id": frame["id"], **result.to_json()})

    try:
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                continue  # binary and control frames carry nothing here
            frame, problem = _read_frame(message.data)
            if problem:
                await send({"type": "error", "code": problem[0], "message": problem[1]})
            elif frame and frame.get("type") == "call":
                task = asyncio.create_task(answer(frame))
                calls.add(task)
                task.add_done_callback(calls.discard)
            # other frame types (ping, bye, unknown) need no answer
    finally:
        for task in calls:
            task.cancel()
    return ws


def _read_frame(text: str) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    """The frame as an object, or ``(code, message)`` of why it cannot be taken."""
    if len(text) > MAX_MESSAGE_BYTES and len(text.encode()) > MAX_MESSAGE_BYTES:
        return None, ("message-too-large", f"a frame over {MAX_MESSAGE_BYTES} bytes")
    try:
        frame = json.loads(text)
    except ValueError:
        return None, ("not-json", "the frame is not JSON")
    if not isinstance(frame, dict):
        return None, ("bad-request", "a frame must be a JSON object")
    if frame.get("type") == "call" and not _is_call_id(frame.get("id")):
        return None, ("bad-request", "a call frame needs an id (a number or a string)")
    return frame, None


def _is_call_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, str) and 0 < len(value) <= 128)
