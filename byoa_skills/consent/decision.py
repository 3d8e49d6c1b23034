"""The one grant decision: how "a site asks" becomes a grant, the same for every way in.

:meth:`GrantDecision.decide` alone chains the steps: the manifest's checks, the site's state,
the skills this engine can serve, what the site asks beyond what it holds (the purpose
included), a consent of that difference when the way in may ask one, the grant with the
visitor's kept choices, and the warm-up. The ways in only translate its answer: a grant, or a
refusal code.

Counted per site: a site that holds a live grant and asks for no more gets that grant back
(as the visitor last narrowed it); one that asks for more and is allowed gets the same grant
with the new terms, its spend, call times and calls in flight carried on. So a site never
holds two grants made here, and asking again never multiplies a rate, the parallel calls or
the budget, nor renews a spent budget.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any

from byoa_skills.consent.desk import (
    ALLOW,
    DECIDE_ON_MY_OWN,
    DECLINE,
    NO_ANSWER,
    ConsentDesk,
)
from byoa_skills.consent.fit import fitting_skills, granted_skills
from byoa_skills.consent.offer import (
    ModelsNotTicked,
    Offer,
    keep_choices,
    make_offer,
    offer_check,
    offer_grant,
    offer_view,
    ticks_gone,
)
from byoa_skills.consent.on_my_own import asks_for_more, granted_part, remember_on_my_own
from byoa_skills.consent.party import party_of
from byoa_skills.consent.scope import More, manifest_problems, more_than
from byoa_skills.store.database import StoreError
from byoa_skills.store.sites import normalize_origin
from byoa_skills.wallet_shim.grants import GrantRefusal
from byoa_skills.wallet_shim.shim import WalletShim
from byoa_skills.wallet_shim.visitor_choices import VisitorChoices

log = logging.getLogger("byoa_skills.consent")

#: The ways in, as the activity log and the consent name them.
REQUEST, LINK, RETURN, PLATFORM = "request", "link", "return", "platform"
#: Consents of grant decisions waiting at once, across all sites; one more is refused.
MAX_WAITING = 8
#: A party's consents of grant decisions waiting at once (its subdomains together: its
#: registrable domain, :func:`~byoa_skills.consent.party.party_of`); one more is refused.
MAX_WAITING_PER_SITE = 1
#: Refusal codes of a decision (beside the manifest's, the site's ``site-STATE`` and the
#: desk's): each a stable kebab-case code.
NO_CLICK = "no-click"
ASKS_FOR_MORE = "asks-for-more"
NO_FITTING_MODEL = "no-fitting-model"
MODEL_NOT_TICKED = "model-not-ticked"
REQUEST_WAITING = "request-waiting"
ON_MY_OWN_OFF = "decide-on-my-own-off"
#: A return finds the site's grant ended (the visitor ended it, or its expiry was reached).
GRANT_ENDED = "grant-ended"
UNREADABLE = "site-unreadable"


@dataclass(frozen=True)
class Asking:
    """How a site asks: the way in, whether the visitor may be shown a consent now (a page's
    click, a link handed over with ``ask``), and what the visitor already decided on that way
    (a terminal's ``allow`` or ``decide-on-my-own`` for a link: a consent without choices)."""

    way: str
    may_ask: bool = False
    decided: str | None = None


@dataclass(frozen=True)
class Decided:
    """A decision: the grant's summary (``grantId``, skills, expiry, limits, models) or a
    refusal ``code`` with the words of what it found (``details``)."""

    grant: dict[str, Any] | None = None
    code: str | None = None
    details: list[str] = field(default_factory=list)
    #: ``allow`` or ``decide-on-my-own``: what the grant was given with.
    decision: str | None = None
    #: Whether the grant is the one the site already held (given back, or with new terms).
    held: bool = False

    @property
    def ok(self) -> bool:
        """Whether a grant was given."""
        return self.grant is not None


class _No(Exception):
    def __init__(self, code: str, details: list[str] | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.details = details or []


class GrantDecision:
    """The one object every way in asks for a grant (see the module's words)."""

    def __init__(self, shim: WalletShim, consents: ConsentDesk | None = None) -> None:
        self.shim = shim
        #: Where a consent is shown (the wallet page); None: no consent can be shown.
        self.consents = consents
        self._waiting: dict[str, int] = {}

    async def decide(self, origin: str, manifest: Any, asking: Asking) -> Decided:
        """A grant for ``origin`` (normalised) asking with ``manifest``, or the refusal's code.

        A link's return (:data:`RETURN`) gets only the site's live grant: one the visitor
        ended, or whose expiry was reached, is not brought back (``grant-ended``).
        Without a consent the site gets at most what it holds (its live grants, and with
        "decide on my own" the scope kept for it), made with the visitor's kept choices
        (limits, budget, expiry, models), and its live grant back when it holds one. More
        (another purpose, skill, language, models block, a looser limit, a larger budget, a
        kept model no longer offered) needs a consent, which only a way that may ask shows;
        the consent starts from the kept choices. Never raises for a refusal."""
        try:
            return await self._decide(origin, manifest, asking)
        except _No as no:
            return Decided(code=no.code, details=no.details)
        except GrantRefusal as refusal:
            return Decided(code=refusal.code)
        except (StoreError, sqlite3.Error, OSError) as error:  # fail closed, and say so
            log.error("event=store-unreadable origin=%s error=%r", origin, str(error))
            return Decided(code=UNREADABLE)

    async def given(self, origin: Any, manifest: Any, grant: Any) -> dict[str, Any]:
        """Take a grant the wallet app gave for ``origin`` (it showed the consent itself: the
        local API's ``POST /v1/grants``), counted per site like every other: a site that holds
        a live grant keeps it, with the given terms (the same ``grantId``, its spend, call
        times and calls in flight carried on); one that holds none gets a new one. Its
        summary once what it runs on is warm, or :class:`GrantRefusal` (``origin-invalid``,
        ``site-paused``, ``site-blocked``, the checks of the manifest and the grant)."""
        shim = self.shim
        try:
            key: str | None = normalize_origin(origin)
        except (ValueError, TypeError, AttributeError):
            key = None  # refused origin-invalid by create_grant, with its activity entry
        live = shim.grants.newest_of(key) if key is not None else None
        if live is None:
            summary = shim.create_grant(origin, manifest, grant)
        else:
            state = await asyncio.to_thread(shim.sites.state, live.origin)
            if state != "active":
                shim.record_activity(kind="grant", origin=live.origin, outcome=f"site-{state}")
                raise GrantRefusal(f"site-{state}", f"the visitor has {state} this site")
            summary = shim.succeed_grant(live.id, manifest, grant)
        await shim.engine.warm_up(summary["skills"])
        return summary

    async def _decide(self, origin: str, manifest: Any, asking: Asking) -> Decided:
        problems = manifest_problems(manifest)
        if problems:  # nothing is shown of a manifest that breaks the rules
            raise _No(str(problems[0]["code"]), sorted({str(p["code"]) for p in problems}))
        shim = self.shim
        state = await asyncio.to_thread(shim.sites.state, origin)
        entry = await asyncio.to_thread(shim.sites.get, origin)
        if state != "active":
            raise _No(f"site-{state}")
        on_my_own = entry is not None and entry.decide_on_my_own
        if asking.way == REQUEST and not asking.may_ask and not on_my_own:
            raise _No(NO_CLICK)
        if asking.way == RETURN and not on_my_own:
            raise _No(ON_MY_OWN_OFF)
        if asking.way == RETURN and shim.grants.newest_of(origin) is None:
            raise _No(GRANT_ENDED)  # a return comes back to a live grant, never renews one
        skills = granted_skills(manifest, await fitting_skills(shim.engine, manifest))
        if skills is None:  # a required skill no model here can serve: no consent
            raise _No(NO_FITTING_MODEL)
        asked = granted_part(manifest, skills)
        more = await asyncio.to_thread(asks_for_more, shim, origin, asked, on_my_own=on_my_own)
        if asking.way == LINK and not on_my_own and not asking.decided and not more:
            # "off" means off: a new link asks, even while the site's earlier link holds a
            # live grant (only a return of the same link, its pairing, comes back unasked)
            more = more_than(None, asked)
        offer = await make_offer(shim, origin, asked, skills)
        choices: VisitorChoices | None = None
        decision = asking.decided or (DECIDE_ON_MY_OWN if on_my_own else ALLOW)
        decided = asking.decided is not None
        gone = ticks_gone(offer, decided=decided)
        if gone and (decided or (not more and not asking.may_ask)):
            raise _No(MODEL_NOT_TICKED)  # never other models than the visitor ticked
        if not decided and (more or gone):  # a consent of the difference, models with it
            shown = replace(more, first=True) if gone else more
            decision, choices = await self._consent(origin, offer, shown, asking)
        try:
            given = offer_grant(offer, choices, decided=decided)
        except ModelsNotTicked:
            raise _No(MODEL_NOT_TICKED) from None
        live = shim.grants.newest_of(origin)
        if live is not None and choices is None and not more:
            summary = live.summary()  # what it holds, as the visitor last narrowed it
        elif live is not None:
            summary = shim.succeed_grant(live.id, manifest, given)
        else:
            summary = shim.create_grant(origin, manifest, given)
        await shim.engine.warm_up(summary["skills"])
        await keep_choices(shim, origin, choices, given)
        chosen_now = choices is not None or asking.decided is not None
        if decision == DECIDE_ON_MY_OWN and chosen_now and asking.way in (REQUEST, LINK):
            await remember_on_my_own(shim, origin, manifest, summary["skills"])
        return Decided(grant=summary, decision=decision, held=live is not None)

    async def _consent(
        self, origin: str, offer: Offer, more: More, asking: Asking
    ) -> tuple[str, VisitorChoices]:
        """The visitor's answer to the consent of ``more``, with their choices laid over the
        kept ones (an Allow that changes nothing keeps them)."""
        if not asking.may_ask:  # more than it holds is a new consent, and that needs a click
            raise _No(ASKS_FOR_MORE, more.codes())
        if self.consents is None:
            raise _No("no-wallet-page" if asking.way == REQUEST else "declined")
        party = party_of(origin)  # subdomains of one party share its place
        waiting = self._waiting.get(party, 0)
        if waiting >= MAX_WAITING_PER_SITE or sum(self._waiting.values()) >= MAX_WAITING:
            raise _No(REQUEST_WAITING)
        self._waiting[party] = waiting + 1
        try:
            answer = await self.consents.decide(
                asking.way, origin, offer_view(offer, more), offer_check(offer, more)
            )
        finally:
            self._waiting[party] -= 1
            if not self._waiting[party]:
                del self._waiting[party]
        if answer.decision == DECLINE:
            raise _No("declined")
        if answer.decision == NO_ANSWER:
            raise _No(NO_ANSWER)
        if answer.decision not in (ALLOW, DECIDE_ON_MY_OWN):  # the desk could not ask
            raise _No(answer.decision)
        return answer.decision, over_kept(offer.kept, answer.choices)


def over_kept(kept: VisitorChoices, chosen: VisitorChoices) -> VisitorChoices:
    """The choices of a consent laid over those kept for the site: each limit the visitor
    set now replaces the kept one (``null`` takes it back to the manifest's), and the
    models, budget and expiry chosen now replace the kept ones; what was not touched stays."""
    limits: dict[str, float | None] = {**kept.limits, **chosen.limits}
    return VisitorChoices(
        models=chosen.models if chosen.models is not None else kept.models,
        limits={name: value for name, value in limits.items() if value is not None},
        budget=chosen.budget if chosen.budget is not None else kept.budget,
        expires_in_minutes=chosen.expires_in_minutes
        if chosen.expires_in_minutes is not None
        else kept.expires_in_minutes,
    )
