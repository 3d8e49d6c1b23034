"""The site's HTTP routes: the page, the code, the wait, the WebSocket, and the mode's own:
the transcription (``geo``), or the question and the grant (``text``)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from aiohttp import web

from byoa_skills.demos.site.demo import SiteDemo
from byoa_skills.demos.site.text import AskRefused, ask_every_model, read_question, session_view

STATIC = Path(__file__).resolve().parent / "static"
#: The page each mode serves at ``/``.
PAGES = {"geo": "index.html", "text": "text.html"}
MAX_CLIP_BYTES = 1024 * 1024
WAV_TYPES = frozenset({"audio/wav", "audio/x-wav", "audio/wave"})
DEMO_KEY = web.AppKey("demo", SiteDemo)
FORWARDED_KEY = web.AppKey("trust_forwarded", bool)
# The page loads nothing from elsewhere and runs no inline script.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def client_address(request: web.Request) -> str:
    """The visitor's address: the peer, or the last X-Forwarded-For hop behind a proxy."""
    if request.app[FORWARDED_KEY]:
        forwarded = request.headers.get("X-Forwarded-For", "").split(",")[-1].strip()
        if forwarded:
            return forwarded
    return request.remote or "unknown"


async def page(request: web.Request) -> web.FileResponse:
    """``GET /``: the mode's page (the geography game, or the text mode's)."""
    return web.FileResponse(STATIC / PAGES[request.app[DEMO_KEY].mode])


async def new_code(request: web.Request) -> web.Response:
    """``POST /byoa/code``: ``{session, link}``, or 429 over the per-address limit."""
    issued = request.app[DEMO_KEY].new_code(client_address(request))
    if issued is None:
        return web.json_response(
            {"error": "too-many-codes"}, status=429, headers={"Retry-After": "60"}
        )
    session, link = issued
    return web.json_response({"session": session, "link": link})


async def wait(request: web.Request) -> web.Response:
    """``GET /byoa/wait?session=``: ``{"state": "waiting" | "connected" | "expired"}``."""
    state = request.app[DEMO_KEY].wait_state(request.query.get("session"))
    return web.json_response({"state": state}, headers={"Cache-Control": "no-store"})


async def socket(request: web.Request) -> web.WebSocketResponse:
    """``GET /byoa/ws``: the wallet's WebSocket."""
    return await request.app[DEMO_KEY].handle_socket(request)


async def transcribe(request: web.Request) -> web.Response:
    """``POST /byoa/transcribe?session=&language=`` with a WAV body: ``{"text": str | null}``.

    null is every "no" of the wallet alike (none connected, refused, failed, too slow).
    """
    demo = request.app[DEMO_KEY]
    if request.content_type not in WAV_TYPES:
        return web.json_response({"error": "send audio/wav"}, status=415)
    language = request.query.get("language", "en")
    if language not in _languages(demo):
        return web.json_response({"error": "unknown language"}, status=400)
    wav = await request.read()  # over MAX_CLIP_BYTES: 413 from aiohttp
    text = await demo.transcribe(request.query.get("session", ""), wav, language)
    return web.json_response({"text": text})


async def ask(request: web.Request) -> web.Response:
    """``POST /byoa/ask?session=`` with ``{"question", "maxTokens"?, "stream"?}``: the question
    to each granted model code, ``{"answers": [{"model", "text", "pieces"}]}``, ``text`` null
    for a code with no answer; ``answers`` empty when no wallet is connected. 415 for another
    content type, 400 for a question the site does not send (``error``, ``message``)."""
    demo = request.app[DEMO_KEY]
    if request.content_type != "application/json":
        return _refused(AskRefused("not-json"), 415)
    body: Any = None
    with contextlib.suppress(ValueError):
        body = await request.json()
    try:
        question = read_question(body, demo.manifest)
    except AskRefused as refusal:
        return _refused(refusal, 400)
    answers = await ask_every_model(demo, request.query.get("session", ""), question)
    return web.json_response({"answers": answers})


async def grant(request: web.Request) -> web.Response:
    """``GET /byoa/grant?session=``: ``{"state", "grant"}``, the grant as the wallet last
    told it (see :func:`~byoa_skills.demos.site.text.session_view`)."""
    view = session_view(request.app[DEMO_KEY], request.query.get("session", ""))
    return web.json_response(view, headers={"Cache-Control": "no-store"})


def _refused(refusal: AskRefused, status: int) -> web.Response:
    return web.json_response({"error": refusal.code, "message": refusal.message}, status=status)


def _languages(demo: SiteDemo) -> list[str]:
    skill: Any = demo.manifest.get("skills", {}).get("audio.transcribe", {})
    languages = skill.get("languages") if isinstance(skill, dict) else None
    return languages if isinstance(languages, list) else ["en"]


@web.middleware
async def security_headers(request: web.Request, handler: Any) -> web.StreamResponse:
    """Add the page's security headers to every answer but the WebSocket's."""
    response = await handler(request)
    if not isinstance(response, web.WebSocketResponse):
        response.headers.update(SECURITY_HEADERS)
    return response


def build_app(demo: SiteDemo, *, trust_forwarded: bool = False) -> web.Application:
    """The aiohttp application of the site; ``trust_forwarded`` takes the visitor's address
    from X-Forwarded-For (only behind a reverse proxy that sets it)."""
    app = web.Application(client_max_size=MAX_CLIP_BYTES, middlewares=[security_headers])
    app[DEMO_KEY] = demo
    app[FORWARDED_KEY] = trust_forwarded
    app.router.add_get("/", page)
    app.router.add_post("/byoa/code", new_code)
    app.router.add_get("/byoa/wait", wait)
    app.router.add_get("/byoa/ws", socket)
    if demo.mode == "text":
        app.router.add_post("/byoa/ask", ask)
        app.router.add_get("/byoa/grant", grant)
    else:
        app.router.add_post("/byoa/transcribe", transcribe)
    app.router.add_static("/static/", STATIC, follow_symlinks=False)
    app.on_shutdown.append(_say_bye)
    return app


async def _say_bye(app: web.Application) -> None:
    await app[DEMO_KEY].close()


async def start_site(
    demo: SiteDemo | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    endpoint: str | None = None,
    trust_forwarded: bool = False,
    **demo_options: Any,
) -> tuple[web.AppRunner, str, SiteDemo]:
    """Start the site and return ``(runner, page URL, demo)``; stop it with
    ``await runner.cleanup()``.

    ``port`` 0 takes a free port. ``host`` ``localhost`` listens on 127.0.0.1 and, where
    there is one, ::1 on the same port (a wallet may resolve either). Without ``demo`` one
    is made with ``demo_options``; without ``endpoint`` the demo's endpoint becomes
    ``ws://localhost:PORT/byoa/ws`` (the wallet's developer switch allows only that name).
    """
    if demo is None:
        demo = SiteDemo(endpoint or "", **demo_options)
    runner = web.AppRunner(build_app(demo, trust_forwarded=trust_forwarded), access_log=None)
    await runner.setup()
    hosts = ["127.0.0.1", "::1"] if host == "localhost" else [host]
    try:
        await web.TCPSite(runner, hosts[0], port).start()
        port = runner.addresses[0][1]
        for other in hosts[1:]:
            with contextlib.suppress(OSError):
                await web.TCPSite(runner, other, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    if endpoint is not None:
        demo.endpoint = endpoint
    elif not demo.endpoint:
        demo.endpoint = f"ws://localhost:{port}/byoa/ws"
    shown = f"[{hosts[0]}]" if ":" in hosts[0] else hosts[0]
    return runner, f"http://{shown}:{port}", demo
