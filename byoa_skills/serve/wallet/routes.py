"""The wallet page's routes on the local API.

- ``POST /v1/wallet/tickets`` (the API token): a one-time ticket and the page's URL with it.
- ``GET /wallet/`` and its files: the page (plain HTML, CSS, JavaScript; no data in them).
- ``POST /wallet/api/session``: a ticket traded for the session cookie.
- ``/wallet/api/...``: consents, sites, grants, activity, engine, pairings (the cookie).
- ``GET /wallet/api/live``: a WebSocket that tells the page of consents and activity as they
  come.

Every ``/wallet`` route takes only the page's own origin: a request whose ``Origin`` is not
``http://HOST`` of the request (itself a loopback name), or whose ``Sec-Fetch-Site`` is not
``same-origin``, is refused; a change (any ``POST``) and the WebSocket must carry that
``Origin``. Every answer forbids framing, sniffing, caching and referrers, and its CSP allows
only the page's own files.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from importlib import resources
from typing import Any

from aiohttp import WSMsgType, web

from byoa_skills.byoag.connector import revoke
from byoa_skills.byoag.registrations import RegistrationStore
from byoa_skills.consent.desk import Consent, ConsentDesk
from byoa_skills.consent.site_changes import SITE_ACTIONS, SiteChanges
from byoa_skills.directlink.intake import LinkIntake, dev_local_enabled
from byoa_skills.protocol.codes import status_of
from byoa_skills.protocol.frames import encode
from byoa_skills.serve.bodies import choice_refusal, json_body, refusal
from byoa_skills.serve.wallet.opener import PageOpener
from byoa_skills.serve.wallet.sessions import COOKIE, WalletSessions, cookie_header
from byoa_skills.serve.wallet.views import engine_view, judge_models, pairings_view, sites_view
from byoa_skills.skills import SkillEngine
from byoa_skills.store.database import StoreError
from byoa_skills.wallet_shim.grants import GrantRefusal
from byoa_skills.wallet_shim.shim import WalletShim
from byoa_skills.wallet_shim.visitor_choices import ChoiceRefusal, read_choices

log = logging.getLogger("byoa_skills.wallet")

PAGE_PREFIX = "/wallet"
API_PREFIX = "/wallet/api/"
#: The page's files, by the name in its URL.
FILES = {
    "": ("index.html", "text/html"),
    "app.js": ("app.js", "text/javascript"),
    "style.css": ("style.css", "text/css"),
}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; "
        "object-src 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
ACTIVITY_PAGE = 100


class WalletPage:
    """What the page's routes work with, and the pages connected now."""

    def __init__(
        self,
        engine: SkillEngine,
        shim: WalletShim,
        intake: LinkIntake,
        consents: ConsentDesk,
        *,
        registrations: RegistrationStore | None = None,
    ) -> None:
        self.engine = engine
        self.shim = shim
        self.intake = intake
        self.consents = consents
        self.registrations = registrations or RegistrationStore()
        self.sessions = WalletSessions()
        #: The engine's own base URL (``http://127.0.0.1:8787``), once it is bound.
        self.base_url: str | None = None
        self.pages: set[web.WebSocketResponse] = set()
        self.opener = PageOpener()
        consents.listen(self._on_consent)
        shim.watch_activity(self._on_activity)

    def page_url(self, base_url: str) -> str:
        """The page's URL on ``base_url`` with a fresh one-time ticket in its fragment."""
        return f"{base_url}{PAGE_PREFIX}/#ticket={self.sessions.new_ticket()}"

    def publish(self, event: dict[str, Any]) -> None:
        """Send ``event`` to every connected page (a page that cannot take it is dropped)."""
        text = encode(event)
        for ws in list(self.pages):
            if ws.closed:
                self.pages.discard(ws)
                continue
            task = asyncio.ensure_future(ws.send_str(text))
            task.add_done_callback(_quiet)

    def _on_consent(self, event: str, consent: Consent) -> None:
        self.publish({"type": event, "consent": consent.to_json()})
        if event == "consent" and not self.pages and self.base_url:
            self.opener.open(self.page_url(self.base_url))

    def _on_activity(self, entry: dict[str, Any]) -> None:
        if self.pages:
            self.publish({"type": "activity", "entry": entry})


PAGE_KEY = web.AppKey("wallet_page", WalletPage)


def add_routes(app: web.Application, page: WalletPage) -> None:
    """Add the page's routes and its response headers to the local API's application."""
    app[PAGE_KEY] = page
    app.on_response_prepare.append(_security_headers)
    router = app.router
    router.add_post("/v1/wallet/tickets", _new_ticket)
    router.add_get(PAGE_PREFIX, _to_page)
    router.add_get(PAGE_PREFIX + "/{name:(|app\\.js|style\\.css)}", _file)
    router.add_post(API_PREFIX + "session", _session)
    router.add_post(API_PREFIX + "logout", _logout)
    router.add_get(API_PREFIX + "consents", _consents)
    router.add_post(API_PREFIX + "consents/{consent_id}", _answer)
    router.add_get(API_PREFIX + "sites", _sites)
    router.add_post(API_PREFIX + "sites", _change_site)
    router.add_post(API_PREFIX + "grants/{grant_id}/release", _release)
    router.add_post(API_PREFIX + "grants/{grant_id}/change", _change_grant)
    router.add_get(API_PREFIX + "activity", _activity)
    router.add_get(API_PREFIX + "engine", _engine)
    router.add_get(API_PREFIX + "judge", _judge)
    router.add_post(API_PREFIX + "judge", _set_judge)
    router.add_get(API_PREFIX + "pairings", _pairings)
    router.add_post(API_PREFIX + "pairings/{platform}/revoke", _revoke)
    router.add_get(API_PREFIX + "live", _live)


def is_page_path(path: str) -> bool:
    """Whether ``path`` is one of the page's (cookie and origin rules, not the token)."""
    return path == PAGE_PREFIX or path.startswith(PAGE_PREFIX + "/")


def page_refusal(request: web.Request) -> tuple[int, str, str] | None:
    """Why a request to the page's routes is refused, as ``(status, code, message)``; None
    when it may go on. The host is already known to be a loopback name."""
    own = f"http://{request.host}"
    origin = request.headers.get("Origin")
    if origin is not None and origin != own:
        return 403, "forbidden-origin", "only the wallet page itself is served"
    fetch_site = request.headers.get("Sec-Fetch-Site")
    api = request.path.startswith(API_PREFIX)
    allowed_sites = ("same-origin",) if api else ("same-origin", "none")
    if fetch_site is not None and fetch_site not in allowed_sites:
        return 403, "forbidden-origin", "only the wallet page itself is served"
    if not api:
        return None
    changes = request.method != "GET" or request.headers.get("Upgrade", "").lower() == "websocket"
    if changes and origin is None:
        return 403, "forbidden-origin", "a change must come from the wallet page"
    if request.path != API_PREFIX + "session":
        page = request.app[PAGE_KEY]
        if not page.sessions.valid(request.cookies.get(COOKIE)):
            return 401, "no-session", "open the wallet page with `byoa-skills wallet`"
    return None


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    if is_page_path(request.path):
        response.headers.update(SECURITY_HEADERS)


async def _new_ticket(request: web.Request) -> web.Response:
    page = request.app[PAGE_KEY]
    return web.json_response({"ok": True, "url": page.page_url(f"http://{request.host}")})


async def _to_page(request: web.Request) -> web.Response:
    raise web.HTTPFound(PAGE_PREFIX + "/")


async def _file(request: web.Request) -> web.Response:
    name, content_type = FILES[request.match_info["name"]]
    body = resources.files(__package__).joinpath("static", name).read_bytes()
    return web.Response(body=body, content_type=content_type, charset="utf-8")


async def _session(request: web.Request) -> web.Response:
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    session = request.app[PAGE_KEY].sessions.trade(body.get("ticket"))
    if session is None:
        return refusal(403, "bad-ticket", "this ticket is unknown, used or expired")
    response = web.json_response({"ok": True})
    response.headers["Set-Cookie"] = cookie_header(session)
    return response


async def _logout(request: web.Request) -> web.Response:
    request.app[PAGE_KEY].sessions.end(request.cookies.get(COOKIE))
    response = web.json_response({"ok": True})
    response.headers["Set-Cookie"] = f"{COOKIE}=; Path={PAGE_PREFIX}; Max-Age=0"
    return response


async def _consents(request: web.Request) -> web.Response:
    waiting = request.app[PAGE_KEY].consents.waiting()
    return web.json_response({"ok": True, "consents": [c.to_json() for c in waiting]})


async def _answer(request: web.Request) -> web.Response:
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    desk = request.app[PAGE_KEY].consents
    try:
        answered = desk.answer(
            request.match_info["consent_id"], body.get("decision"), body.get("choices")
        )
    except ChoiceRefusal as refused:
        return choice_refusal(refused)
    if not answered:
        return refusal(404, "no-such-consent", "this consent was answered or has timed out")
    return web.json_response({"ok": True})


async def _sites(request: web.Request) -> web.Response:
    try:
        sites = sites_view(request.app[PAGE_KEY].shim)
    except StoreError as error:
        return refusal(status_of(error.code), error.code, str(error)[:200])
    return web.json_response({"ok": True, "sites": sites})


async def _change_site(request: web.Request) -> web.Response:
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    action, origin = body.get("action"), body.get("origin")
    if action not in SITE_ACTIONS or not isinstance(origin, str):
        return refusal(400, "bad-request", f"action must be one of {', '.join(SITE_ACTIONS)}")
    page = request.app[PAGE_KEY]
    setting = body.get("on") is True if action == "decide-on-my-own" else body.get("setting")
    try:
        done = await SiteChanges(page.shim).change(action, origin, setting)
    except ChoiceRefusal as refused:
        if refused.code == "no-judge":
            return refusal(404, "no-judge", "this engine has no purpose judge")
        return choice_refusal(refused)
    except ValueError as error:
        return refusal(400, "origin-invalid", str(error)[:200])
    except StoreError as error:
        return refusal(status_of(error.code), error.code, str(error)[:200])
    page.publish({"type": "sites-changed"})
    return web.json_response(done.to_json())


async def _release(request: web.Request) -> web.Response:
    page = request.app[PAGE_KEY]
    if not page.shim.release_grant(request.match_info["grant_id"]):
        return refusal(404, "unknown-grant", "no live grant has this id")
    page.publish({"type": "sites-changed"})
    return web.json_response({"ok": True})


async def _change_grant(request: web.Request) -> web.Response:
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    page = request.app[PAGE_KEY]
    try:
        choices = read_choices(body)
        summary = SiteChanges(page.shim).grant(request.match_info["grant_id"], choices)
    except ChoiceRefusal as refused:
        return choice_refusal(refused)
    except GrantRefusal as refused:
        return refusal(404, refused.code, str(refused))
    page.publish({"type": "sites-changed"})
    return web.json_response({"ok": True, "grant": summary})


async def _activity(request: web.Request) -> web.Response:
    query = request.query
    filters: dict[str, Any] = {
        key: query[key] for key in ("origin", "skill", "decision", "code") if query.get(key)
    }
    try:
        if query.get("before"):
            filters["before"] = int(query["before"])
        limit = min(int(query.get("limit", ACTIVITY_PAGE)), 500)
        if limit < 1:
            raise ValueError("limit must be 1 or more")
        log_ = request.app[PAGE_KEY].shim.activity
        entries = await asyncio.to_thread(log_.query, limit=limit, **filters)
    except ValueError as error:
        return refusal(400, "bad-request", str(error)[:200])
    except StoreError as error:
        return refusal(status_of(error.code), error.code, str(error)[:200])
    return web.json_response({"ok": True, "entries": entries})


async def _engine(request: web.Request) -> web.Response:
    """The engine view, with the store's state; ``?only=store``: the store's state alone
    (cheap: the page asks for it often)."""
    page = request.app[PAGE_KEY]
    store = (await asyncio.to_thread(page.shim.sites.database.check)).to_json()
    if request.query.get("only") == "store":
        return web.json_response({"ok": True, "store": store})
    view = await engine_view(page.engine)
    return web.json_response({"ok": True, **view, "store": store})


async def _judge(request: web.Request) -> web.Response:
    """The purpose judge's default, the model judging now, whether its source answers."""
    page = request.app[PAGE_KEY]
    judges = page.shim.judges
    if judges is None:
        return web.json_response({"ok": True, "judge": None})
    try:
        status = await judges.status()
    except StoreError as error:  # like every wallet route: the store's own code
        return refusal(status_of(error.code), error.code, str(error)[:200])
    status["offered"] = await judge_models(page.engine)
    return web.json_response({"ok": True, "judge": status})


async def _set_judge(request: web.Request) -> web.Response:
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    page = request.app[PAGE_KEY]
    if page.shim.judges is None:
        return refusal(404, "no-judge", "this engine has no purpose judge")
    try:
        page.shim.judges.set_default(body)
        status = await page.shim.judges.status()
    except ChoiceRefusal as refused:
        return choice_refusal(refused)
    except StoreError as error:
        return refusal(status_of(error.code), error.code, str(error)[:200])
    return web.json_response({"ok": True, "judge": status})


async def _pairings(request: web.Request) -> web.Response:
    store = request.app[PAGE_KEY].registrations
    return web.json_response({"ok": True, "pairings": pairings_view(store)})


async def _revoke(request: web.Request) -> web.Response:
    store = request.app[PAGE_KEY].registrations
    told = await revoke(request.match_info["platform"], store=store, dev_local=dev_local_enabled())
    if told is None:
        return refusal(404, "not-paired", "no pairing with this platform")
    return web.json_response({"ok": True, "platformTold": bool(told)})


async def _live(request: web.Request) -> web.WebSocketResponse:
    page = request.app[PAGE_KEY]
    ws = web.WebSocketResponse(heartbeat=30, max_msg_size=4096)
    await ws.prepare(request)
    page.pages.add(ws)
    try:
        waiting = [consent.to_json() for consent in page.consents.waiting()]
        await ws.send_str(encode({"type": "hello", "consents": waiting}))
        async for message in ws:
            if message.type == WSMsgType.ERROR:
                break  # the page sends nothing the engine needs
    finally:
        page.pages.discard(ws)
    return ws


def _quiet(task: asyncio.Future[Any]) -> None:
    with contextlib.suppress(asyncio.CancelledError, ConnectionError, RuntimeError):
        task.exception()
