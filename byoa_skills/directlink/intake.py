"""Links handed to the engine: the checks before anything is contacted, then a direct link
per site the visitor allowed, and the pairings that come back after a restart."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Sequence
from typing import Any

from byoa_skills.consent.decision import LINK, Asking, GrantDecision
from byoa_skills.consent.desk import DECIDE_ON_MY_OWN, ConsentDesk
from byoa_skills.consent.scope import manifest_problems
from byoa_skills.directlink.check import check_link
from byoa_skills.directlink.client import RECONNECT_SCHEDULE, DirectLink, LinkSession, link_origin
from byoa_skills.store.database import StoreError
from byoa_skills.store.link_pairings import PairingStore, RecentCodes
from byoa_skills.wallet_shim.shim import WalletShim

log = logging.getLogger("byoa_skills.links")

#: Links handled at once (the site guide's 4); one more is refused.
MAX_LINKS_AT_ONCE = 4
#: How long taking a link waits for the site's welcome before it answers "connecting".
WELCOME_WAIT_SECONDS = 15.0
DECISIONS = ("allow", "decide-on-my-own", "decline")
#: What ``connect`` sends when the visitor is to decide on the wallet page.
ASK = "ask"
UNREADABLE = "the wallet's store cannot be read; no site is served until it can"
#: The words of a link's refusals by code (the others: "the site gets no grant").
_MESSAGES = {
    "site-unreadable": UNREADABLE,
    "site-paused": "the visitor has paused this site",
    "site-blocked": "the visitor has blocked this site",
    "no-fitting-model": "a skill the site requires cannot be served here",
    "model-not-ticked": "no model the visitor ticked can serve the site",
    "declined": "the visitor declined",
    "no-answer": "the visitor did not answer",
    "too-many-consents": "the consent could not be shown",
    "request-waiting": "a consent for this site is already waiting",
}
#: Seconds of the reconnection schedule, comma-separated, for tests and slow networks.
SCHEDULE_ENV = "BYOA_WALLET_RECONNECT_SCHEDULE"


def dev_local_enabled() -> bool:
    """Whether the developer switch ``BYOA_WALLET_DEV_LOCAL=1`` is on."""
    return os.environ.get("BYOA_WALLET_DEV_LOCAL") == "1"


def reconnect_schedule() -> tuple[float, ...]:
    """The reconnection schedule: ``$BYOA_WALLET_RECONNECT_SCHEDULE`` or 1, 2, 5, 10, 30 s."""
    text = os.environ.get(SCHEDULE_ENV, "")
    try:
        schedule = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        schedule = ()
    return schedule if schedule and all(s >= 0 for s in schedule) else RECONNECT_SCHEDULE


class LinkIntake:
    """Takes links for the engine: at most 4 at once, each checked before any contact."""

    def __init__(
        self,
        shim: WalletShim,
        *,
        pairings: PairingStore | None = None,
        recent: RecentCodes | None = None,
        schedule: Sequence[float] | None = None,
        dev_local: bool | None = None,
        consents: ConsentDesk | None = None,
        decision: GrantDecision | None = None,
    ) -> None:
        self.shim = shim
        self.pairings = pairings or PairingStore(shim.sites.database)
        self.recent = recent or RecentCodes(shim.sites.database)
        self.schedule = tuple(schedule) if schedule is not None else reconnect_schedule()
        self.dev_local = dev_local_enabled() if dev_local is None else dev_local
        #: Where a link with the decision ``ask`` is shown to the visitor (the wallet page).
        self.consents = consents
        #: The one grant decision (shared with the other ways in).
        self.decision = decision or GrantDecision(shim, consents)
        self.sessions: dict[str, LinkSession] = {}
        self._runners: dict[str, asyncio.Task[str]] = {}
        self._tasks: set[asyncio.Task[str]] = set()
        self._handling = 0

    async def take(self, link: Any, decision: Any) -> dict[str, Any]:
        """Handle a link the visitor decided on: ``{"ok", "state" | "code", "origin"}``.

        ``decision`` ``ask`` shows the consent on the wallet page and waits for the visitor (a
        site they let the wallet decide for is not asked). Refused before any contact: a link
        that fails a check, one more than 4 at once, a code seen in the last 10 minutes, a
        blocked or paused site, a decline or no answer. Each refusal leaves only an activity
        entry.
        """
        if decision not in (*DECISIONS, ASK):
            return {
                "ok": False,
                "code": "bad-decision",
                "message": "allow, decide-on-my-own, decline, or ask (the wallet page)",
            }
        check = check_link(link if isinstance(link, str) else "", dev_local=self.dev_local)
        if not check.ok:
            return self._refused(None, str(check.code), str(check.message))
        origin = link_origin(check)
        problems = manifest_problems(check.manifest)
        if problems:  # the wallet's own rules, before anything is shown
            return self._refused(origin, str(problems[0]["code"]), str(problems[0]["message"]))
        if self._handling >= MAX_LINKS_AT_ONCE:
            return self._refused(origin, "too-many-links", "4 links are being handled already")
        self._handling += 1  # taken before the first wait: links arriving together count
        try:
            try:
                fresh = await asyncio.wrap_future(self.recent.remember(check.session))
                state = self.shim.sites.state(origin)
            except (StoreError, sqlite3.Error, OSError) as error:  # fail closed, and say so
                log.error("event=store-unreadable error=%r", str(error))
                return self._refused(origin, "site-unreadable", UNREADABLE)
            if not fresh:
                return self._refused(
                    origin, "code-seen", "this session code was seen in the last 10 minutes"
                )
            if state != "active":
                return self._refused(origin, f"site-{state}", f"the visitor has {state} this site")
            if decision == "decline":
                return self._refused(origin, "declined", "the visitor declined")
            asking = Asking(
                LINK, may_ask=decision == ASK, decided=None if decision == ASK else decision
            )
            decided = await self.decision.decide(origin, check.manifest, asking)
            if decided.grant is None:
                return self._refused(
                    origin,
                    str(decided.code),
                    _MESSAGES.get(str(decided.code), "the site gets no grant"),
                )
            self._hand_over(origin, str(decided.grant["grantId"]))
            session = LinkSession(
                link,
                check,
                origin,
                decide_on_my_own=decided.decision == DECIDE_ON_MY_OWN,
                grant_id=str(decided.grant["grantId"]),
            )
            self._start(session)
            try:
                await asyncio.wait_for(session.welcomed.wait(), WELCOME_WAIT_SECONDS)
            except asyncio.TimeoutError:
                return {"ok": True, "origin": origin, "state": "connecting"}
        finally:
            self._handling -= 1
        if session.ended is not None:
            return {
                "ok": False,
                "origin": origin,
                "code": session.ended,
                "message": "the site did not take the connection",
            }
        return {"ok": True, "origin": origin, "state": "connected", "grantId": session.grant_id}

    def _hand_over(self, origin: str, grant_id: str) -> None:
        """The site's earlier link, when it holds the same grant, is left (its connection
        closed) without ending the grant: the new link takes it over."""
        earlier = self.sessions.get(origin)
        task = self._runners.get(origin)
        if earlier is None or task is None or task.done() or earlier.grant_id != grant_id:
            return
        earlier.grant_id = None  # the grant is the new link's now: leaving must not end it
        task.cancel()

    def resume_pairings(self) -> int:
        """Come back to every site kept with "decide on my own"; how many (none while the
        store cannot be read, logged: no site is served from a store that fails)."""
        try:
            kept = self.pairings.all()
        except StoreError as error:
            log.error("event=pairings-unreadable code=%s error=%r", error.code, str(error))
            return 0
        count = 0
        for origin, record in kept.items():
            check = check_link(str(record.get("link", "")), dev_local=self.dev_local)
            if not check.ok or link_origin(check) != origin or not record.get("pairing"):
                self.pairings.drop(origin)
                continue
            try:
                state = self.shim.sites.state(origin)
                entry = self.shim.sites.get(origin)
            except StoreError as error:
                log.error("event=pairings-unreadable code=%s error=%r", error.code, str(error))
                return count
            if entry is None or not entry.decide_on_my_own:  # turned off: no return
                self.pairings.drop(origin)
                continue
            if state != "active":
                continue
            session = LinkSession(
                record["link"], check, origin, decide_on_my_own=True, pairing=str(record["pairing"])
            )
            self._start(session)
            count += 1
        return count

    async def close(self) -> None:
        """Leave every site (their grants are released)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _start(self, session: LinkSession) -> None:
        runner = DirectLink(
            self.shim,
            session,
            pairings=self.pairings,
            schedule=self.schedule,
            dev_local=self.dev_local,
            decision=self.decision,
        )
        task = asyncio.create_task(runner.run(), name=f"link-{session.origin}")
        self._tasks.add(task)
        self.sessions[session.origin] = session
        self._runners[session.origin] = task
        task.add_done_callback(self._tasks.discard)

    def _refused(self, origin: str | None, code: str, message: str) -> dict[str, Any]:
        self.shim.record_activity(kind="link", origin=origin, outcome=code)
        log.info("event=link-refused origin=%s code=%s", origin, code)
        return {"ok": False, "code": code, "message": message, "origin": origin}
