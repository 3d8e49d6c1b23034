"""The local API: ``/health``, ``/ready``, ``/metrics``, ``POST /v1/skills/{skill}`` and the
WebSocket ``/v1/ws`` that speaks the direct link's ``call`` / ``result`` frames.

Only loopback Host names are served (a DNS-rebinding page gets nothing), a request from a
web page (one with an ``Origin``) is refused, and everything but the health checks needs
the bearer token.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import re
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from byoa_skills.byoag.scope import RegistrationCalls
from byoa_skills.consent.decision import GrantDecision
from byoa_skills.consent.site_changes import SITE_ACTIONS, SiteChanges
from byoa_skills.directlink.intake import LinkIntake
from byoa_skills.extension.requests import PageRequests
from byoa_skills.protocol.codes import GATE_STATUS, status_of
from byoa_skills.protocol.frames import (
    ABSENT,
    MAX_FRAME_BYTES,
    READ_LIMIT_BYTES,
    Call,
    Error,
    FrameError,
    Json,
    error_frame,
    present,
)
from byoa_skills.protocol.serving import SendChunk, serve_calls
from byoa_skills.runtimes.speech.base import PHASES
from byoa_skills.runtimes.text import ChunkHook
from byoa_skills.serve.bodies import choice_refusal, json_body, refusal
from byoa_skills.serve.extension_routes import add_routes as add_extension_routes
from byoa_skills.serve.metrics import EngineMetrics
from byoa_skills.serve.openai_api import add_openai_routes
from byoa_skills.serve.openapi import openapi_handler
from byoa_skills.serve.wallet.routes import (
    PAGE_KEY,
    WalletPage,
    add_routes,
    is_page_path,
    page_refusal,
)
from byoa_skills.skills import CallResult, SkillEngine, http_status
from byoa_skills.store.database import StoreError
from byoa_skills.wallet_shim.grants import GrantRefusal
from byoa_skills.wallet_shim.shim import WalletShim
from byoa_skills.wallet_shim.visitor_choices import ChoiceRefusal, read_choices

log = logging.getLogger("byoa_skills.api")

#: The largest request body taken: the direct link's frame limit.
MAX_MESSAGE_BYTES = MAX_FRAME_BYTES
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
#: The ``Host`` headers served: a loopback name, then nothing or ``:`` and a port of digits.
LOOPBACK_HOST_HEADER = re.compile(
    r"(?:localhost|127\.0\.0\.1|\[::1\])(?::[0-9]{1,5})?", re.ASCII | re.IGNORECASE
)
OPEN_PATHS = frozenset({"/health", "/ready", "/openapi.json"})
#: Seconds a connection may take to send a whole request head, and may stay idle between
#: requests, before it is closed (aiohttp's ``keepalive_timeout`` covers both).
HEADER_READ_SECONDS = 10.0


#: The most calls one ``/v1/ws`` connection may have pending (the pool's default queue).
MAX_PENDING_CALLS = 64
_TOO_MANY_PENDING = {
    "ok": False,
    "code": "too-many-pending-calls",
    "message": f"{MAX_PENDING_CALLS} calls of this connection are pending",
}

ENGINE_KEY = web.AppKey("engine", SkillEngine)
METRICS_KEY = web.AppKey("metrics", EngineMetrics)
TOKEN_KEY = web.AppKey("token", str)
SHIM_KEY = web.AppKey("shim", WalletShim)
LINKS_KEY = web.AppKey("links", LinkIntake)
REGISTRATIONS_KEY = web.AppKey("registrations", RegistrationCalls)
DECISION_KEY = web.AppKey("decision", GrantDecision)


def build_app(
    engine: SkillEngine,
    metrics: EngineMetrics,
    token: str,
    shim: WalletShim,
    links: LinkIntake | None = None,
    registrations: RegistrationCalls | None = None,
    page: WalletPage | None = None,
    requests: PageRequests | None = None,
) -> web.Application:
    """The aiohttp application of the local API (with the wallet page's routes when a
    ``page`` is given, and the browser extension's when its ``requests`` are).

    Every way in asks one grant decision: the link intake's (made with the wallet page's
    consent desk) is handed to the page requests and the paired platforms, so that a site's
    grant and its waiting consents are counted once, whichever way it asks."""
    app = web.Application(
        middlewares=[_guard],
        client_max_size=MAX_MESSAGE_BYTES,
        handler_args={"max_field_size": 8190},
    )
    app[ENGINE_KEY] = engine
    app[METRICS_KEY] = metrics
    app[TOKEN_KEY] = token
    app[SHIM_KEY] = shim
    links = links or LinkIntake(shim, consents=requests.consents if requests else None)
    decision = links.decision  # the one grant decision of every way in
    registrations = registrations or RegistrationCalls(shim)
    registrations.decision = decision
    if requests is not None:
        requests.decision = decision
    app[LINKS_KEY] = links
    app[DECISION_KEY] = decision
    app[REGISTRATIONS_KEY] = registrations
    app.router.add_get("/health", _health)
    app.router.add_get("/ready", _ready)
    app.router.add_get("/metrics", _metrics)
    app.router.add_post("/v1/links", _take_link)
    app.router.add_post("/v1/grants", _create_grant)
    app.router.add_get("/v1/grants/{grant_id}", _show_grant)
    app.router.add_delete("/v1/grants/{grant_id}", _release_grant)
    app.router.add_post("/v1/sites/limits", _set_site_limits)
    app.router.add_post("/v1/sites/change", _change_site)
    app.router.add_post("/v1/skills/{skill}", _call_over_http)
    app.router.add_get("/v1/ws", _websocket)
    app.router.add_get("/openapi.json", openapi_handler)
    recordings = add_openai_routes(app, engine, shim)
    if recordings is not None:
        metrics.watch_recordings(recordings)
    if page is not None:
        add_routes(app, page)
    if requests is not None:
        add_extension_routes(app, requests)
    return app


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not loopback_host(request):
        return _refused("forbidden-host", "only loopback host names are served")
    if is_page_path(request.path):
        refused = page_refusal(request) if PAGE_KEY in request.app else None
        if refused is not None:
            return refusal(*refused)
    elif "Origin" in request.headers:
        return _refused("forbidden-origin", "requests from web pages are not served")
    elif request.path not in OPEN_PATHS:
        expected = f"Bearer {request.app[TOKEN_KEY]}".encode()
        given = request.headers.get("Authorization", "").encode("utf-8", "replace")
        if not hmac.compare_digest(given, expected):
            return _refused("unauthorized", "a valid bearer token is needed")
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return _refused("not-found", f"nothing at {request.path[:80]}")
    except web.HTTPMethodNotAllowed:
        return _refused("method-not-allowed", f"{request.method} is not allowed here")


def _refused(code: str, message: str) -> web.Response:
    """The refusal ``code`` with its status from the one table."""
    return refusal(status_of(code), code, message)


def loopback_host(request: web.Request) -> bool:
    """Whether ``request`` carries exactly one ``Host`` header, and it is all of
    :data:`LOOPBACK_HOST_HEADER`: ``[::1]evil``, ``127.0.0.1:P@evil.com``, ``localhost:abc``,
    an empty one and none at all are foreign."""
    hosts = request.headers.getall("Host", [])
    return len(hosts) == 1 and LOOPBACK_HOST_HEADER.fullmatch(hosts[0]) is not None


async def _health(request: web.Request) -> web.Response:
    """The engine answers (always 200); ``status`` is ``degraded`` while the wallet's store
    cannot be used or a change waits to be written, and ``store`` says why; ``encoder`` names
    what runs the speech workers' encoder, when the engine has them, ``ct2Kernels``
    CTranslate2's CPU kernels they decode with and ``vad`` what runs their VAD; ``pid`` is the
    engine's process (its record, :mod:`byoa_skills.serve.engine_record`, names it too)."""
    store = await asyncio.to_thread(request.app[SHIM_KEY].sites.database.check)
    status = "ok" if store.ok else "degraded"
    answer: dict[str, Any] = {"ok": True, "status": status, "store": store.to_json()}
    answer["pid"] = os.getpid()
    pool = request.app[ENGINE_KEY].pool
    if pool is not None:
        encoder = pool.encoder
        answer["encoder"] = encoder.label
        answer["encoderPrecision"] = encoder.precision
        if encoder.kernels:
            answer["ct2Kernels"] = encoder.kernels
        if encoder.vad:
            answer["vad"] = encoder.vad
        if encoder.label != pool.config.encoder.label:  # a fallback: why
            answer["encoderNote"] = encoder.reason
    return web.json_response(answer)


async def _ready(request: web.Request) -> web.Response:
    engine = request.app[ENGINE_KEY]
    if engine.ready:
        pool = engine.pool
        workers = pool.worker_pids() if pool is not None else []
        warm = pool.warm_workers if pool is not None else 0
        return web.json_response({"ready": True, "workers": workers, "warm": warm})
    return web.json_response({"ready": False}, status=status_of("not-ready"))


async def _metrics(request: web.Request) -> web.Response:
    body = request.app[METRICS_KEY].exposition()
    return web.Response(body=body, content_type="text/plain", charset="utf-8")


async def _take_link(request: web.Request) -> web.Response:
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    answer = await request.app[LINKS_KEY].take(body.get("link"), body.get("decision"))
    status = 200 if answer["ok"] else status_of(str(answer["code"]), GATE_STATUS)
    return web.json_response(answer, status=status)


async def _create_grant(request: web.Request) -> web.Response:
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    try:
        summary = await request.app[DECISION_KEY].given(
            body.get("origin"), body.get("manifest"), body.get("grant")
        )
    except GrantRefusal as refused:
        answer = {
            "ok": False,
            "code": refused.code,
            "message": refused.message,
            "errors": refused.errors,
        }
        return web.json_response(answer, status=refused.status)
    return web.json_response({"ok": True, **summary})


async def _show_grant(request: web.Request) -> web.Response:
    grant = request.app[SHIM_KEY].grants.get(request.match_info["grant_id"])
    if grant is None:
        return _refused("unknown-grant", "no live grant has this id")
    return web.json_response({"ok": True, **grant.summary(), "record": grant.record()})


async def _release_grant(request: web.Request) -> web.Response:
    if request.app[SHIM_KEY].release_grant(request.match_info["grant_id"]):
        return web.json_response({"ok": True})
    return _refused("unknown-grant", "no live grant has this id")


async def _set_site_limits(request: web.Request) -> web.Response:
    """The visitor's choices (``{origin, choices}``) for every live grant of a site, as on
    the Sites view; each one's summary as it now is."""
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    changes = SiteChanges(request.app[SHIM_KEY])
    try:
        summaries = changes.limits(body.get("origin"), read_choices(body.get("choices")))
    except ChoiceRefusal as refused:
        return choice_refusal(refused)
    except GrantRefusal as refused:
        return web.json_response(
            {"ok": False, "code": refused.code, "message": refused.message}, status=refused.status
        )
    if not summaries:
        return refusal(404, "no-live-grant", "the site holds no live grant")
    return web.json_response({"ok": True, "grants": summaries})


async def _change_site(request: web.Request) -> web.Response:
    """A change of a site from the terminal (``{action, origin, setting?}``: pause, resume,
    block, forget, decide-on-my-own with ``setting`` true or false), through the one owner
    the wallet page uses: in force at once, told to the site, written to the store."""
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    action, origin = body.get("action"), body.get("origin")
    if action not in SITE_ACTIONS or action == "judge" or not isinstance(origin, str):
        return _refused(
            "bad-request",
            "action must be pause, resume, block, forget or decide-on-my-own, with an origin",
        )
    try:
        done = await SiteChanges(request.app[SHIM_KEY]).change(
            action, origin, body.get("setting") is True
        )
    except ValueError as error:
        return _refused("origin-invalid", str(error)[:200])
    except StoreError as error:
        return _refused(error.code, str(error)[:200])
    return web.json_response(done.to_json())


async def _call_over_http(request: web.Request) -> web.Response:
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    result = await _call(
        request.app,
        request.match_info["skill"],
        body.get("input"),
        body.get("params"),
        body.get("deadlineSeconds"),
        grant_id=body.get("grantId", ABSENT),
        registration=body.get("registration", ABSENT),
    )
    return web.json_response(
        result.to_json(), status=http_status(result), headers=_server_timing(result)
    )


async def _call(
    app: web.Application,
    skill: Any,
    skill_input: Any,
    params: Any,
    deadline: Any,
    on_chunk: ChunkHook | None = None,
    *,
    grant_id: Json = ABSENT,
    registration: Json = ABSENT,
) -> CallResult:
    """A call under its ``grant_id`` through the shim, for a paired platform (its
    ``registration``) within the registration's scope, or with neither (both
    :data:`~byoa_skills.protocol.frames.ABSENT`): the wallet's own."""
    args = (skill, skill_input, params, deadline, on_chunk)
    if grant_id is not ABSENT:
        return await app[SHIM_KEY].call(grant_id, *args)
    if registration is not ABSENT:
        return await app[REGISTRATIONS_KEY].call(registration, *args)
    return await app[ENGINE_KEY].call(*args)


#: The ``Server-Timing`` metrics with a duration, by the call's fact that holds it (ms).
TIMED_METRICS = (
    ("queue", "queued_ms"),
    ("infer", "infer_ms"),
    *((phase, f"{phase}_ms") for phase in PHASES),
    ("handoff", "handoff_ms"),
)


def _server_timing(result: CallResult) -> dict[str, str]:
    """A ``Server-Timing`` header with the queue wait, the model's time and its phases, and
    the pool's handoff around it, when known; and the encoder window (seconds) and the encoder
    (``openvino-bf16``, ``ctranslate2-int8``…) that gave a transcript."""
    parts = [
        f"{name};dur={result.facts[key]}" for name, key in TIMED_METRICS if key in result.facts
    ]
    if "window_s" in result.facts:
        parts.append(f'window;desc="{result.facts["window_s"]:g}s"')
    if result.facts.get("encoder"):
        parts.append(f'encoder;desc="{result.facts["encoder"]}"')
    return {"Server-Timing": ", ".join(parts)} if parts else {}


async def _websocket(request: web.Request) -> web.WebSocketResponse:
    """``/v1/ws``: ``call`` frames answered with ``result`` frames, many at once, at most
    :data:`MAX_PENDING_CALLS` pending (one more is refused ``too-many-pending-calls`` at once);
    every refused frame is answered with its ``error`` frame and the socket stays; ``bye`` is
    ignored like ``ping``; a client that takes no frame for
    :data:`~byoa_skills.protocol.pending.SEND_SECONDS` is closed (1008) and its calls
    cancelled."""
    ws = web.WebSocketResponse(max_msg_size=READ_LIMIT_BYTES, heartbeat=None)
    await ws.prepare(request)
    app = request.app

    async def answer(call: Call, on_chunk: SendChunk) -> dict[str, Any]:
        result = await _call(
            app,
            call.skill,
            call.input,
            call.params,
            present(call.deadline_seconds),
            on_chunk,
            grant_id=call.grant_id,
            registration=call.registration,
        )
        return result.to_json()

    await serve_calls(
        ws,
        answer,
        limit=MAX_PENDING_CALLS,
        over_bound=lambda call: _TOO_MANY_PENDING,
        refused=_error_of,
    )
    return ws


def _error_of(refused: FrameError) -> Error:
    return error_frame(refused.code, refused.message)
