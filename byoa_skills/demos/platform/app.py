"""The reference platform's HTTP routes.

Public: the descriptor, the JWKS, redemption, status, revocation and ``/api/whoami`` (the one
protected resource: a DPoP-bound credential with a fresh proof). First-party, for the demo's
signed-in account holder (``Authorization: Bearer SESSION``): make a code, list and decide
pending confirmations.
"""

from __future__ import annotations

import contextlib
import json
import socket
from typing import Any

from aiohttp import web

from byoa_skills.demos.platform.errors import (
    INVALID_REQUEST,
    PROOF_OF_POSSESSION_FAILED,
    PlatformRefusal,
)
from byoa_skills.demos.platform.platform import (
    JWKS_PATH,
    PAIR_PATH,
    REVOKE_PATH,
    SCOPES,
    STATUS_PATH,
    WELL_KNOWN,
    WHOAMI_PATH,
    DemoPlatform,
)

PLATFORM_KEY = web.AppKey("platform", DemoPlatform)
MAX_BODY = 16 * 1024
NO_STORE = {"Cache-Control": "no-store"}


async def descriptor(request: web.Request) -> web.Response:
    """``GET /.well-known/byoag.json``: the signed descriptor."""
    return web.json_response(request.app[PLATFORM_KEY].descriptor())


async def key_set(request: web.Request) -> web.Response:
    """``GET /.well-known/byoag-jwks.json``: the platform's public keys."""
    return web.json_response(request.app[PLATFORM_KEY].jwks())


async def pair(request: web.Request) -> web.Response:
    """``POST /byoag/pair``: redeem a code (201 active, or 202 pending)."""
    platform = request.app[PLATFORM_KEY]
    answer = platform.redeem(
        request.headers.get("DPoP"), await _body(request), request.remote or "unknown"
    )
    status = 201 if answer["status"] == "active" else 202
    return web.json_response(answer, status=status, headers=NO_STORE)


async def pair_status(request: web.Request) -> web.Response:
    """``POST /byoag/pair/status``: pending, or the registration once confirmed."""
    answer = request.app[PLATFORM_KEY].status(request.headers.get("DPoP"), await _body(request))
    return web.json_response(answer, headers=NO_STORE)


async def revoke(request: web.Request) -> web.Response:
    """``POST /byoag/revoke``: end the registration whose credential comes with the proof."""
    platform = request.app[PLATFORM_KEY]
    platform.revoke(_authenticated(request, REVOKE_PATH))
    return web.json_response({"status": "revoked"})


async def whoami(request: web.Request) -> web.Response:
    """``GET /api/whoami``: the registration the credential belongs to."""
    registration = _authenticated(request, WHOAMI_PATH)
    return web.json_response(
        {
            "account": registration.account,
            "registration_id": registration.id,
            "agent_id": registration.agent_id,
            "scope": list(registration.scope),
        },
        headers=NO_STORE,
    )


async def new_code(request: web.Request) -> web.Response:
    """``POST /account/pairing-codes`` ``{mode?, scope?}``: a code for the signed-in
    account."""
    platform = request.app[PLATFORM_KEY]
    account = _account(request)
    body = await _body(request, optional=True)
    mode, scope = body.get("mode"), body.get("scope", list(SCOPES))
    if (mode is not None and not isinstance(mode, str)) or not isinstance(scope, list):
        raise PlatformRefusal(INVALID_REQUEST, 400)
    code = platform.new_code(account, mode, scope)
    return web.json_response(
        {"code": code, "mode": mode or platform.mode, "expires_in": int(platform.codes.lifetime)},
        headers=NO_STORE,
    )


async def pending(request: web.Request) -> web.Response:
    """``GET /account/pending``: the confirmations the signed-in account has to decide."""
    entries = request.app[PLATFORM_KEY].pending_of(_account(request))
    return web.json_response(
        [
            {
                "pairing_id": pairing_id,
                "agent_id": entry.agent_id,
                "agent_name": entry.agent_name,
                "scope": list(entry.scope),
            }
            for pairing_id, entry in entries.items()
        ],
        headers=NO_STORE,
    )


async def decide(request: web.Request) -> web.Response:
    """``POST /account/pending/{id}/approve`` or ``/decline``."""
    approve = request.match_info["decision"] == "approve"
    found = request.app[PLATFORM_KEY].decide(_account(request), request.match_info["id"], approve)
    if not found:
        return web.json_response({"error": "not_found"}, status=404)
    return web.json_response({"status": "approved" if approve else "declined"})


@web.middleware
async def refusals(request: web.Request, handler: Any) -> web.StreamResponse:
    """A :class:`PlatformRefusal` becomes its JSON answer; a refused proof also says
    ``WWW-Authenticate: DPoP``, a rate limit ``Retry-After``."""
    try:
        return await handler(request)
    except PlatformRefusal as refusal:
        headers = dict(NO_STORE)
        if refusal.code == PROOF_OF_POSSESSION_FAILED:
            headers["WWW-Authenticate"] = 'DPoP algs="EdDSA"'
        if refusal.status == 429:
            headers["Retry-After"] = "60"
        return web.json_response(refusal.body(), status=refusal.status, headers=headers)


def build_app(platform: DemoPlatform) -> web.Application:
    """The aiohttp application of ``platform``."""
    app = web.Application(client_max_size=MAX_BODY, middlewares=[refusals])
    app[PLATFORM_KEY] = platform
    app.router.add_get(WELL_KNOWN, descriptor)
    app.router.add_get(JWKS_PATH, key_set)
    app.router.add_post(PAIR_PATH, pair)
    app.router.add_post(STATUS_PATH, pair_status)
    app.router.add_post(REVOKE_PATH, revoke)
    app.router.add_get(WHOAMI_PATH, whoami)
    app.router.add_post("/account/pairing-codes", new_code)
    app.router.add_get("/account/pending", pending)
    app.router.add_post("/account/pending/{id}/{decision:approve|decline}", decide)
    return app


async def start_platform(
    platform: DemoPlatform | None = None,
    *,
    host: str = "localhost",
    port: int = 0,
    issuer: str | None = None,
    **options: Any,
) -> tuple[web.AppRunner, DemoPlatform]:
    """Start a platform and return ``(runner, platform)``; stop it with
    ``await runner.cleanup()``. ``port`` 0 takes a free port; ``localhost`` listens on
    127.0.0.1 and, where there is one, ::1 on the same port. Without ``platform`` one is made
    with ``options``, its issuer ``issuer`` or ``http://localhost:PORT``."""
    sockets = _listen(host, port)
    port = sockets[0].getsockname()[1]
    if platform is None:
        platform = DemoPlatform(issuer or f"http://localhost:{port}", **options)
    runner = web.AppRunner(build_app(platform), access_log=None)
    await runner.setup()
    try:
        for sock in sockets:
            await web.SockSite(runner, sock).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, platform


def _listen(host: str, port: int) -> list[socket.socket]:
    """Listening sockets on ``host`` (both loopback addresses for ``localhost``)."""
    hosts = ["127.0.0.1", "::1"] if host == "localhost" else [host]
    sockets: list[socket.socket] = []
    for address in hosts:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address, port))
            sock.listen(128)
        except OSError:
            sock.close()
            if not sockets:
                raise
            continue  # no ::1 here: 127.0.0.1 alone
        sockets.append(sock)
        port = sock.getsockname()[1]
    return sockets


async def _body(request: web.Request, optional: bool = False) -> dict[str, Any]:
    if optional and not request.can_read_body:
        return {}
    with contextlib.suppress(ValueError, UnicodeDecodeError):
        body = json.loads(await request.read())
        if isinstance(body, dict):
            return body
    raise PlatformRefusal(INVALID_REQUEST, 400)


def _account(request: web.Request) -> str:
    scheme, _, session = request.headers.get("Authorization", "").partition(" ")
    account = request.app[PLATFORM_KEY].account_of(session) if scheme == "Bearer" else None
    if account is None:
        raise web.HTTPUnauthorized(text="sign in first", headers={"WWW-Authenticate": "Bearer"})
    return account


def _authenticated(request: web.Request, path: str) -> Any:
    return request.app[PLATFORM_KEY].authenticate(
        request.headers.get("Authorization"), request.headers.get("DPoP"), request.method, path
    )
