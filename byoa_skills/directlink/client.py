"""The direct link, wallet side: after the visitor's Allow, the wallet opens a WebSocket to the
site's endpoint, says hello with the session code and the grant, checks the welcome's echo
of the manifest, and answers the site's ``call`` frames through the shim.

The connection goes to an address the wallet resolved and checked itself (public only; the
developer switch allows ``localhost``), with TLS verified for the site's name, no proxy, no
cookies and no redirects. With "decide on my own" the pairing token is kept and the wallet
comes back after a drop or a restart, after 1, 2, 5, 10 and then every 30 seconds, to the
grant it held: the engine's stop leaves a paired site's grant live (its expiry and spend
hold across the return), and a grant that ended (released by the visitor, the site blocked
or forgotten, its expiry reached) ends the pairing too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import ClientRequest, ClientResponse, WSMsgType

from byoa_skills import __version__
from byoa_skills.consent.decision import ON_MY_OWN_OFF, RETURN, Asking, GrantDecision
from byoa_skills.directlink.addresses import AddressRefused, PinnedResolver, resolve_public
from byoa_skills.directlink.check import LinkCheck
from byoa_skills.protocol.frames import (
    LINK_CLOSE,
    READ_LIMIT_BYTES,
    Call,
    Close,
    Error,
    Frame,
    FrameError,
    Ignored,
    Welcome,
    bye_frame,
    encode,
    grant_frame,
    hello_frame,
    read_frame,
)
from byoa_skills.protocol.pending import PENDING_MARGIN
from byoa_skills.protocol.serving import SendChunk, serve_calls
from byoa_skills.store.clock import now_ms
from byoa_skills.store.database import StoreError
from byoa_skills.store.link_pairings import PairingStore
from byoa_skills.wallet_shim.grants import GrantRefusal
from byoa_skills.wallet_shim.limits import DEFAULT_MAX_PARALLEL_CALLS
from byoa_skills.wallet_shim.shim import WalletShim

log = logging.getLogger("byoa_skills.direct")

PING_SECONDS = 30.0
WELCOME_SECONDS = 10.0
#: Seconds before each attempt to come back after a drop; the last repeats.
RECONNECT_SCHEDULE: tuple[float, ...] = (1, 2, 5, 10, 30)
WALLET = {"name": "byoa-skills", "version": __version__}
#: The answer to a call over the connection's bound of pending calls (a site sees only this).
TOO_MANY_PENDING = {"ok": False}
#: A link's endings after which the wallet does not come back, even after a restart: the
#: site broke the protocol, or the grant ended (the visitor's end and expiry hold).
ENDS_PAIRING = frozenset(
    {"malformed", "too-large", "bad-session", "manifest-mismatch", "grant-ended", "grant-released"}
)
#: The code the wallet's log keeps for such a call.
TOO_MANY_PENDING_CODE = "too-many-pending-calls"


@dataclass
class LinkSession:
    """One site reached through a link, for as long as the wallet stays with it."""

    link: str
    check: LinkCheck
    origin: str
    decide_on_my_own: bool
    pairing: str | None = None
    #: The site's grant (None: asked of the one grant decision when the link comes back).
    grant_id: str | None = None
    welcomed: asyncio.Event = field(default_factory=asyncio.Event)
    ended: str | None = None
    #: The wallet said bye because the grant ended (released, blocked, forgotten, expired).
    grant_ended: bool = False
    #: The grant as the site was last told it (the hello's, then each ``grant`` frame's).
    told: dict[str, Any] | None = None


def link_origin(check: LinkCheck) -> str:
    """The site's origin, as the site list and grants name it."""
    scheme = "https" if check.secure else "http"
    default = 443 if check.secure else 80
    return f"{scheme}://{check.host}" + ("" if check.port == default else f":{check.port}")


async def link_grant(
    shim: WalletShim, check: LinkCheck, origin: str, decision: GrantDecision | None = None
) -> dict[str, Any]:
    """The grant of a link's return after a drop or a restart (the wallet comes back to a
    site it decides for on its own), from the one grant decision with no consent: the site's
    live grant, or one made with what the visitor chose before; :class:`GrantRefusal` with
    the decision's code (``decide-on-my-own-off``, ``asks-for-more``, ``model-not-ticked``,
    ``no-fitting-model``, ``grant-ended``...) otherwise."""
    decided = await (decision or GrantDecision(shim)).decide(origin, check.manifest, Asking(RETURN))
    if decided.grant is None:
        raise GrantRefusal(str(decided.code), "the site gets no grant on its return")
    return decided.grant


async def _refuse_redirects(request: ClientRequest, handler: Any) -> ClientResponse:
    response = await handler(request)
    if 300 <= response.status < 400:
        raise aiohttp.ClientError(f"the site answered with a redirect ({response.status})")
    return response


class DirectLink:
    """Runs one link session: connect, hello, welcome, calls; and come back when allowed."""

    def __init__(
        self,
        shim: WalletShim,
        session: LinkSession,
        *,
        pairings: PairingStore | None = None,
        schedule: Sequence[float] = RECONNECT_SCHEDULE,
        dev_local: bool = False,
        decision: GrantDecision | None = None,
    ) -> None:
        self.shim = shim
        self.decision = decision
        self.session = session
        self.pairings = pairings or PairingStore(shim.sites.database)
        self.schedule = tuple(schedule)
        self.dev_local = dev_local

    async def run(self) -> str:
        """Stay with the site until it ends the session or the wallet may not come back;
        the reason it ended (``bye``, ``bad-session``, ``manifest-mismatch``, ...)."""
        session = self.session
        keep_grant = False
        try:
            if session.grant_id is None:  # a return: the one grant decision, no consent
                summary = await link_grant(self.shim, session.check, session.origin, self.decision)
                session.grant_id = summary["grantId"]
            attempt = 0
            while True:
                reason = await self._connect_once()
                if reason != "dropped" or not session.decide_on_my_own:
                    break
                if self.shim.sites.state(session.origin) != "active":
                    reason = "site-not-active"
                    break
                try:
                    entry = await asyncio.to_thread(self.shim.sites.get, session.origin)
                except StoreError:  # fail closed: no return while the store cannot be read
                    entry = None
                if entry is None or not entry.decide_on_my_own:  # the visitor turned it off
                    reason = ON_MY_OWN_OFF
                    break
                if session.welcomed.is_set():  # it had come back: start the schedule again
                    attempt = 0
                delay = self.schedule[min(attempt, len(self.schedule) - 1)]
                attempt += 1
                session.welcomed.clear()
                log.info("event=link-reconnect origin=%s in_s=%g", session.origin, delay)
                await asyncio.sleep(delay)
        except GrantRefusal as refusal:
            reason = refusal.code
        except AddressRefused as refused:
            log.warning("event=link-refused origin=%s reason=%r", session.origin, str(refused))
            reason = AddressRefused.code
        except asyncio.CancelledError:  # the engine stops: a paired site's grant waits for it
            keep_grant = session.decide_on_my_own and bool(session.pairing)
            raise
        finally:
            if session.grant_id and not keep_grant:
                self.shim.release_grant(session.grant_id)
        session.ended = reason
        session.welcomed.set()  # nobody waits for a welcome that will not come
        if reason in ENDS_PAIRING:
            self.pairings.drop(session.origin)
        self.shim.record_activity(kind="link", origin=session.origin, outcome=reason)
        return reason

    async def _connect_once(self) -> str:
        check = self.session.check
        allow_loopback = self.dev_local and check.host == "localhost"
        try:
            address = await resolve_public(check.host, check.port, allow_loopback=allow_loopback)
        except AddressRefused as refused:
            if refused.unresolved:  # the name does not resolve now: like a drop
                return "dropped"
            raise
        connector = aiohttp.TCPConnector(resolver=PinnedResolver(address), use_dns_cache=False)
        async with aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            middlewares=(_refuse_redirects,),
        ) as client:
            try:
                ws = await client.ws_connect(
                    check.endpoint, max_msg_size=READ_LIMIT_BYTES, autoping=True, heartbeat=None
                )
            except (aiohttp.ClientError, OSError) as error:
                log.info(
                    "event=link-connect-failed origin=%s error=%r", self.session.origin, str(error)
                )
                return "dropped"
            async with ws:
                ending = await self._converse(ws)
            log.info(
                "event=link-closed origin=%s ending=%s close_code=%s",
                self.session.origin,
                ending,
                ws.close_code,
            )
            return ending

    async def _converse(self, ws: aiohttp.ClientWebSocketResponse) -> str:
        session, check = self.session, self.session.check
        grant = self.shim.grants.get(session.grant_id)
        if grant is None:
            return "grant-released"
        first = session.pairing is None
        granted = self.shim.site_grant(grant)
        session.told = granted
        hello = hello_frame(check.session if first else None, session.pairing, WALLET, granted)
        await ws.send_str(encode(hello))
        welcome = await self._welcome(ws)
        if welcome is None:
            return "dropped"
        if isinstance(welcome, Error):
            return "bad-session" if welcome.code == "bad-session" else "dropped"
        if welcome.manifest != check.manifest_text:
            await ws.send_str(encode(bye_frame()))
            log.warning("event=link-manifest-mismatch origin=%s", session.origin)
            return "manifest-mismatch"
        pairing = welcome.pairing
        if isinstance(pairing, str) and pairing:
            session.pairing = pairing
            if session.decide_on_my_own:
                self.pairings.keep(
                    session.origin,
                    {
                        "link": session.link,
                        "pairing": pairing,
                    },
                )
        session.welcomed.set()
        log.info("event=link-welcomed origin=%s", session.origin)
        return await self._serve_calls(ws)

    async def _welcome(self, ws: aiohttp.ClientWebSocketResponse) -> Welcome | Error | None:
        """The site's first frame that is a welcome or an error, or None (closed, malformed,
        or nothing within 10 s)."""

        async def first() -> Welcome | Error | None:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                frame = await _take(ws, message.data)
                if frame is None:
                    return None
                if isinstance(frame, (Welcome, Error)):
                    return frame
            return None

        try:
            return await asyncio.wait_for(first(), WELCOME_SECONDS)
        except asyncio.TimeoutError:
            return None

    async def _serve_calls(self, ws: aiohttp.ClientWebSocketResponse) -> str:
        """Answer the site's calls until it says bye or leaves (``bye``, ``dropped``,
        ``malformed``), or stops reading the answers (``not-reading``: the link is closed and
        its calls cancelled). At most the grant's ``maxParallelCalls`` plus
        :data:`PENDING_MARGIN` calls are pending; one more is answered ``ok: false`` at once
        and recorded ``too-many-pending-calls``. A ping every :data:`PING_SECONDS`."""
        grant = self.shim.grants.get(self.session.grant_id)
        parallel = grant.limits.max_parallel_calls if grant else DEFAULT_MAX_PARALLEL_CALLS
        grant_id = self.session.grant_id

        async def answer(call: Call, on_chunk: SendChunk) -> dict[str, Any]:
            result = await self.shim.call(
                grant_id, call.skill, call.input, call.params, on_chunk=on_chunk
            )
            return result.to_json(with_code=False)

        def over_bound(call: Call) -> Mapping[str, Any]:
            self.shim.record_activity(
                kind="call",
                origin=self.session.origin,
                grant=grant_id,
                outcome=TOO_MANY_PENDING_CODE,
            )
            return TOO_MANY_PENDING

        telling = asyncio.create_task(self._tell_changes(ws))
        try:
            ending = await serve_calls(
                ws,
                answer,
                limit=parallel + PENDING_MARGIN,
                over_bound=over_bound,
                refused=_link_refusal,
                bye_ends=True,
                ping_seconds=PING_SECONDS,
            )
        finally:
            telling.cancel()
            await asyncio.gather(telling, return_exceptions=True)
        if self.session.grant_ended:
            return "grant-ended"
        if ending == "not-reading":
            log.warning("event=link-not-reading origin=%s", self.session.origin)
        return ending

    async def _tell_changes(self, ws: aiohttp.ClientWebSocketResponse) -> str:
        """Send the site a ``grant`` frame for each change of its grant the visitor makes
        (one made while the link waited for its welcome is told once it is up; a change the
        site's grant object does not show, such as the budget, sends no frame the same as
        the last), and ``bye`` (then close) when the grant ends: released, the site blocked or
        forgotten, or the grant's expiry reached. ``grant-ended`` once it said bye."""
        grant_id = str(self.session.grant_id)
        changes: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

        def heard(changed_id: str, grant: dict[str, Any] | None) -> None:
            if changed_id == grant_id:
                changes.put_nowait(grant)

        stop = self.shim.watch_grants(heard)
        try:
            while True:
                grant = self.shim.grants.get(grant_id)
                if grant is None:
                    break
                now = self.shim.site_grant(grant)
                if now != self.session.told:  # a change since the site was last told
                    await ws.send_str(encode(grant_frame(now)))
                    self.session.told = now
                    log.info("event=link-grant-told origin=%s", self.session.origin)
                left = max(0.0, (grant.expires_ms - now_ms()) / 1000)
                try:
                    told = await asyncio.wait_for(changes.get(), left)
                except asyncio.TimeoutError:  # it expired
                    self.shim.release_grant(grant_id)
                    break
                if told is None:
                    break
        finally:
            stop()
        self.session.grant_ended = True
        await ws.send_str(encode(bye_frame()))
        await ws.close()
        log.info("event=link-grant-ended origin=%s", self.session.origin)
        return "grant-ended"


async def _take(ws: aiohttp.ClientWebSocketResponse, text: str) -> Frame | Ignored | None:
    """The site's frame; :class:`~byoa_skills.protocol.frames.Ignored` (nothing to do) for one
    to ignore, such as JSON that is not an object or a call without a usable id, which is
    neither run nor answered; None after closing the connection on a frame that is not JSON
    (1007)."""
    try:
        return read_frame(text)
    except FrameError as refused:
        close = _link_refusal(refused)
        if close is None:
            return Ignored()
        await ws.close(code=close.code, message=close.reason)
        return None


def _link_refusal(refused: FrameError) -> Close | None:
    """How the wallet answers a text that is not a frame: the close of
    :data:`~byoa_skills.protocol.frames.LINK_CLOSE`, or None (logged) to ignore it."""
    close = LINK_CLOSE.get(refused.code)
    if close is None:
        log.info("event=link-frame-ignored code=%s", refused.code)
    return close
