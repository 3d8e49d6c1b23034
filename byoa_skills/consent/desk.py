"""The consents waiting for the visitor, one desk for every way in: a link handed over by
``connect``, a ``request`` from the browser extension, and the gate's ``ask`` for a call in
flight. Each is shown on the wallet page; no answer within the timeout (120 s) is a decline.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from byoa_skills.consent.party import party_of
from byoa_skills.consent.shown_text import decode_host, judge_host, shown, shown_value
from byoa_skills.store.clock import now_ms
from byoa_skills.wallet_shim.grants import Grant
from byoa_skills.wallet_shim.visitor_choices import VisitorChoices, read_choices

log = logging.getLogger("byoa_skills.consent")

#: How long a consent waits for an answer, in seconds.
CONSENT_SECONDS = 120.0
#: The environment variable that shortens (or lengthens) the wait, e.g. for tests.
CONSENT_SECONDS_ENV = "BYOA_WALLET_CONSENT_SECONDS"
ALLOW, DECLINE, DECIDE_ON_MY_OWN = "allow", "decline", "decide-on-my-own"
#: The answers a visitor can give.
ANSWERS = (ALLOW, DECLINE, DECIDE_ON_MY_OWN)
#: What a consent that got no answer counts as.
NO_ANSWER = "no-answer"
#: Consents waiting at once, across all sites and ways in; one more is not shown.
MAX_CONSENTS_WAITING = 16
#: What :meth:`ConsentDesk.ask` answers, without showing anything, when that many wait.
TOO_MANY_CONSENTS = "too-many-consents"
#: What the gate's ask answers for a call whose site already has a call waiting for the
#: visitor: one at a time per origin, across all of its grants, so that one site never fills
#: the desk and another site's request is still shown.
ASK_WAITING = "ask-waiting"


#: ``check(choices)``: the choices, or :class:`ChoiceRefusal` when they cannot be taken.
ChoiceCheck = Callable[[VisitorChoices], VisitorChoices]


@dataclass
class Consent:
    """One question to the visitor: what to show (``view``), and the answer it waits for."""

    id: str
    #: ``link``, ``request`` or ``call``.
    kind: str
    origin: str
    view: dict[str, Any]
    created_ms: int
    expires_ms: int
    answer: asyncio.Future[str] = field(repr=False)
    #: Checks the visitor's choices sent with an Allow (raises
    #: :class:`~byoa_skills.wallet_shim.visitor_choices.ChoiceRefusal`); None: the consent
    #: takes no choices.
    check: ChoiceCheck | None = field(default=None, repr=False)
    #: The choices that came with the answer, checked.
    choices: VisitorChoices = field(default_factory=VisitorChoices)

    def to_json(self) -> dict[str, Any]:
        """The consent as the page reads it."""
        return {
            "id": self.id,
            "kind": self.kind,
            "origin": self.origin,
            "view": self.view,
            "createdMs": self.created_ms,
            "expiresMs": self.expires_ms,
        }


@dataclass(frozen=True)
class ConsentAnswer:
    """The visitor's answer and, with an Allow, what they chose (limits, models)."""

    decision: str
    choices: VisitorChoices = field(default_factory=VisitorChoices)


#: ``listener(event, consent)`` hears ``consent`` (a new one) and ``consent-closed``.
Listener = Callable[[str, Consent], None]


class ConsentDesk:
    """The consents waiting for an answer, and whoever listens for them (the page's feed)."""

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = seconds if seconds is not None else consent_seconds()
        self._waiting: dict[str, Consent] = {}
        self._listeners: list[Listener] = []
        self._asking_sites: set[str] = set()
        self._closed = False

    def listen(self, listener: Listener) -> None:
        """Tell ``listener`` of every consent opened and closed from now on."""
        self._listeners.append(listener)

    def waiting(self) -> list[Consent]:
        """The consents waiting now, oldest first."""
        return list(self._waiting.values())

    async def ask(self, kind: str, origin: str, view: dict[str, Any]) -> str:
        """Show a consent and wait for the visitor: ``allow``, ``decline`` or
        ``decide-on-my-own``; ``no-answer`` (a decline) after :attr:`seconds`. A consent whose
        asker goes away (the call was cancelled) closes unanswered. With
        :data:`MAX_CONSENTS_WAITING` already waiting, nothing is shown: ``too-many-consents``."""
        return (await self.decide(kind, origin, view)).decision

    async def decide(
        self, kind: str, origin: str, view: dict[str, Any], check: ChoiceCheck | None = None
    ) -> ConsentAnswer:
        """:meth:`ask`, with the choices the visitor made: ``check`` reads them when the answer
        comes (an answer whose choices it refuses is refused, and the consent waits on).
        Once the desk is closed every ask is ``no-answer`` at once."""
        if self._closed:
            return ConsentAnswer(NO_ANSWER)
        if len(self._waiting) >= MAX_CONSENTS_WAITING:
            log.warning(
                "event=consent-refused kind=%s origin=%s code=%s", kind, origin, TOO_MANY_CONSENTS
            )
            return ConsentAnswer(TOO_MANY_CONSENTS)
        created = now_ms()
        consent = Consent(
            id=secrets.token_urlsafe(12),
            kind=kind,
            origin=origin,
            view=view,
            created_ms=created,
            expires_ms=created + int(self.seconds * 1000),
            answer=asyncio.get_running_loop().create_future(),
            check=check,
        )
        self._waiting[consent.id] = consent
        self._tell("consent", consent)
        log.info("event=consent-open id=%s kind=%s origin=%s", consent.id, kind, origin)
        try:
            decision = await asyncio.wait_for(asyncio.shield(consent.answer), self.seconds)
        except asyncio.TimeoutError:
            decision = NO_ANSWER
        finally:
            self._waiting.pop(consent.id, None)
            self._tell("consent-closed", consent)
        log.info("event=consent-closed id=%s decision=%s", consent.id, decision)
        return ConsentAnswer(decision, consent.choices)

    def close(self) -> int:
        """The engine stops, and a stop never waits on the visitor: every waiting consent is
        answered ``no-answer`` now (what its asker does with no answer), and so is every later
        ask; how many were waiting."""
        self._closed = True
        waiting = [c for c in self._waiting.values() if not c.answer.done()]
        for consent in waiting:
            consent.answer.set_result(NO_ANSWER)
        if waiting:
            log.info("event=consents-closed count=%d", len(waiting))
        return len(waiting)

    def answer(self, consent_id: object, decision: object, choices: object = None) -> bool:
        """Give the visitor's answer to a waiting consent; False when there is no such consent
        (answered, timed out) or the answer is not one of :data:`ANSWERS`. With an Allow, the
        ``choices`` (``{models?, limits?, budget?, expiresInMinutes?}``) are checked first:
        :class:`~byoa_skills.wallet_shim.visitor_choices.ChoiceRefusal` when they cannot be
        taken (the consent waits on). A decline takes no choices."""
        consent = self._waiting.get(consent_id) if isinstance(consent_id, str) else None
        if consent is None or decision not in ANSWERS or consent.answer.done():
            return False
        if decision != DECLINE and consent.check is not None:
            consent.choices = consent.check(read_choices(choices))
        consent.answer.set_result(str(decision))
        return True

    async def ask_call(
        self, grant: Grant, call: dict[str, Any], reasons: list[dict[str, Any]]
    ) -> bool | str:
        """The gate's ask hook: show the call the gate asks about and wait for the visitor;
        True for Allow (or Allow and decide on my own), False for a decline. One call of a
        party (its origin's registrable domain, :func:`party_of`, whichever of its grants the
        call is under) waits for the visitor at a time: another is answered
        :data:`ASK_WAITING` at once, and :data:`TOO_MANY_CONSENTS` when the desk is full (the
        codes it is refused with)."""
        party = party_of(grant.origin)
        if party in self._asking_sites:
            return ASK_WAITING
        self._asking_sites.add(party)
        try:
            decision = await self.ask("call", grant.origin, call_view(grant.origin, call, reasons))
        finally:
            self._asking_sites.discard(party)
        if decision == TOO_MANY_CONSENTS:
            return decision
        return decision in (ALLOW, DECIDE_ON_MY_OWN)

    def _tell(self, event: str, consent: Consent) -> None:
        for listener in self._listeners:
            try:
                listener(event, consent)
            except Exception:  # a listener's failure must not lose the consent
                log.exception("event=consent-listener-failed")


def consent_seconds() -> float:
    """The wait for an answer: ``$BYOA_WALLET_CONSENT_SECONDS`` when it is a positive number,
    else :data:`CONSENT_SECONDS`."""
    try:
        seconds = float(os.environ.get(CONSENT_SECONDS_ENV, ""))
    except ValueError:
        return CONSENT_SECONDS
    return seconds if 0 < seconds <= 3600 else CONSENT_SECONDS


def site_view(origin: str, manifest: dict[str, Any], held: Iterable[str] = ()) -> dict[str, Any]:
    """What the consent for a site's manifest shows: the origin (see :func:`origin_view`), the
    purpose, the skills it asks for that it does not already hold (with languages), the
    limits, the privacy class and the cost. Every text is the manifest's own with its hidden
    characters made visible (:func:`~byoa_skills.consent.shown_text.shown`); the page
    shows it as text, never as markup."""
    purpose = manifest.get("purpose") if isinstance(manifest.get("purpose"), dict) else {}
    skills = manifest.get("skills") if isinstance(manifest.get("skills"), dict) else {}
    already = sorted(set(held) & set(skills))
    asked = []
    for name, entry in skills.items():
        if name in already:
            continue
        entry = entry if isinstance(entry, dict) else {}
        languages = entry.get("languages")
        asked.append(
            {
                "skill": shown(str(name)),
                "languages": [shown(str(code)) for code in languages]
                if isinstance(languages, list)
                else [],
                "required": entry.get("required") is True,
            }
        )
    limits = purpose.get("limits") if isinstance(purpose.get("limits"), dict) else {}
    cost = manifest.get("expectedCost") if isinstance(manifest.get("expectedCost"), dict) else {}
    return {
        **origin_view(origin),
        "purpose": shown(str(purpose.get("summary", ""))),
        "skills": asked,
        "alreadyAllowed": [shown(name) for name in already],
        "limits": {
            shown(str(k)): shown_value(v)
            for k, v in limits.items()
            if isinstance(v, (int, float, str))
        },
        "privacy": shown(str(manifest.get("privacy", ""))),
        "cost": {shown(str(k)): shown(str(v)) for k, v in cost.items()},
    }


def call_view(origin: str, call: dict[str, Any], reasons: list[dict[str, Any]]) -> dict[str, Any]:
    """What the consent for a call the gate asks about shows: the site, the skill, what was
    measured, its estimated cost and the gate's reasons, hidden characters made visible."""
    return {
        **origin_view(origin),
        "skill": shown(str(call.get("skill", ""))),
        "measured": {
            shown(str(k)): shown_value(v) for k, v in (call.get("input") or {}).items() if v
        },
        "estimatedCost": shown(str(call.get("estimatedCost", ""))),
        "reasons": [
            {"code": shown(str(r.get("code", ""))), "message": shown(str(r.get("message", "")))}
            for r in reasons
            if r.get("decision") in ("ask", "warn")
        ],
    }


def origin_view(origin: str) -> dict[str, Any]:
    """The origin, its host as written (``xn--`` punycode for an international name), the host
    in Unicode, the form that heads the consent (``headingHost``) and a warning for a
    look-alike name (``hostWarning``, or None), as
    :func:`~byoa_skills.consent.shown_text.judge_host` decides: a name that mixes
    scripts is headed by its ``xn--`` form, so that it is seen for what it is."""
    rest = origin.partition("://")[2]
    host = rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest
    judged = judge_host(host)
    return {
        "origin": origin,
        "host": shown(host),
        "unicodeHost": judged.unicode,
        "headingHost": judged.heading,
        "hostWarning": judged.warning,
    }


def unicode_host(host: str) -> str:
    """``host`` with each ``xn--`` label decoded (IDNA); the host itself when it has none or
    one that cannot be decoded."""
    decoded = decode_host(host)
    return host if decoded is None else decoded
