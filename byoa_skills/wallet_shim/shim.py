"""The wallet shim: every call from a site passes the visitor's grant before any model runs.

It takes grants the wallet app hands over, measures each call itself (the clip's seconds from
the WAV, the text's code points), asks the gate, runs what may run with the grant's deadline,
records the real cost, and writes one activity entry per request and per call.
"""

from __future__ import annotations

import inspect
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from byoa_skills.protocol.frames import grant_object
from byoa_skills.runtimes.text import ChunkHook
from byoa_skills.skills import Admitted, CallResult, GrantTerms, PreparedCall, SkillEngine
from byoa_skills.skills.call_gate import Run
from byoa_skills.skills.registry import judged
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.clock import now_ms, rfc3339
from byoa_skills.store.database import StoreError
from byoa_skills.store.sites import SiteListError, SiteStore, normalize_origin
from byoa_skills.store.visitor_choices import KeptChoices
from byoa_skills.wallet_shim.gate import Admission, AskHook, Measured, admit, decline, finish
from byoa_skills.wallet_shim.grant_change import changed_grant, kept_choices
from byoa_skills.wallet_shim.grants import Grant, GrantRefusal, GrantStore, build_grant
from byoa_skills.wallet_shim.judge_switch import JudgeSwitch
from byoa_skills.wallet_shim.judged import judged_run
from byoa_skills.wallet_shim.visitor_choices import ChoiceRefusal, VisitorChoices

log = logging.getLogger("byoa_skills.shim")

#: ``pricing(call) -> (provider kind, worst-case cost)`` of a prepared call, in the grant's
#: currency (may be async). A local model costs nothing.
Pricing = Callable[[PreparedCall], tuple[str, Decimal] | Awaitable[tuple[str, Decimal]]]


#: ``watcher(grant_id, grant)``: a live grant changed (``grant`` as the site sees it), or it
#: ended (None).
GrantWatcher = Callable[[str, "dict[str, Any] | None"], None]


class WalletShim:
    """Grants, limits and the activity log in front of a :class:`SkillEngine`."""

    def __init__(
        self,
        engine: SkillEngine,
        sites: SiteStore,
        activity: ActivityLog,
        *,
        ask: AskHook = decline,
        pricing: Pricing | None = None,
        clock: Callable[[], int] = now_ms,
        judges: JudgeSwitch | None = None,
    ) -> None:
        """``pricing`` defaults to the engine's own (:meth:`SkillEngine.price`); ``judges``
        (the purpose judge's settings) None: no call is judged."""
        self.engine = engine
        self.grants = GrantStore(sites.database)
        try:
            kept = self.grants.load(clock())
        except StoreError as error:  # calls are refused site-unreadable until it can be read
            log.error("event=grants-unreadable error=%r", str(error))
        else:
            if kept:
                log.info("event=grants-kept count=%d", kept)
        self.sites = sites
        self.activity = activity
        self._ask = ask
        self._pricing: Pricing = pricing or engine.price
        self._clock = clock
        self.judges = judges
        self._watchers: list[Callable[[dict[str, Any]], None]] = []
        self._grant_watchers: list[GrantWatcher] = []

    # -- grants ---------------------------------------------------------------------------

    def create_grant(self, origin: Any, manifest: Any, grant: Any) -> dict[str, Any]:
        """Take a grant the visitor gave (the wallet app showed the consent): its summary
        ``{grantId, skills, expiresAt, limits}``, or :class:`GrantRefusal`."""
        try:
            origin = self._origin(origin)
            site = self._site_state(origin)
            if site != "active":
                raise GrantRefusal(f"site-{site}", _site_message(site))
            built = build_grant(origin, manifest, grant, self._clock())
        except GrantRefusal as refusal:
            self.record_activity(
                kind="grant",
                origin=_shown(origin),
                outcome=refusal.code,
                codes=[e["code"] for e in refusal.errors] or [refusal.code],
            )
            raise
        self.sites.seen(origin)
        self.grants.prune(self._clock())
        self.grants.add(built)
        self.record_activity(
            kind="grant", origin=origin, grant=built.id, outcome="ok", skills=built.skills
        )
        return built.summary()

    async def grant_when_warm(self, origin: Any, manifest: Any, grant: Any) -> dict[str, Any]:
        """:meth:`create_grant`, answered once what the granted skills run on is warm (the
        speech workers may have been let go while idle), so that the site's first call is as
        fast as the next."""
        summary = self.create_grant(origin, manifest, grant)
        await self.engine.warm_up(summary["skills"])
        return summary

    def succeed_grant(self, grant_id: str, manifest: Any, grant: Any) -> dict[str, Any]:
        """Give the live grant ``grant_id`` the terms of a new consent (``manifest`` and the
        ``grant`` the visitor gave): the same id, and its running record (spend, call times,
        calls in flight) goes on, so that asking again never starts the counts afresh. Its
        summary as it now is, or :class:`GrantRefusal` (``unknown-grant``, or the checks of
        :func:`build_grant`), changing nothing. Told to whoever watches the grants."""
        live = self.grants.get(grant_id)
        if live is None:
            raise GrantRefusal("unknown-grant", "no live grant has this id")
        built = build_grant(live.origin, manifest, grant, self._clock(), live.id)
        live.manifest = built.manifest
        live.take_terms_of(built)
        self.grants.replace(live)
        self.record_activity(
            kind="grant", origin=live.origin, grant=live.id, outcome="ok", skills=live.skills
        )
        self._tell_grant(live)
        return live.summary()

    def release_grant(self, grant_id: str) -> bool:
        """Forget a grant; calls already running finish. False when it was not live. Whoever
        watches the grants hears that it ended."""
        released = self.grants.release(grant_id)
        if released is not None:
            self.record_activity(
                kind="release", origin=released.origin, grant=grant_id, outcome="ok"
            )
            self._tell_grant(released, ended=True)
        return released is not None

    def change_grant(self, grant_id: str, choices: VisitorChoices) -> dict[str, Any]:
        """Make a live grant stricter as the visitor chose (:func:`change_problems`): its
        summary as it is now, or :class:`GrantRefusal` (``unknown-grant``) /
        :class:`ChoiceRefusal` (what is wider, or not valid), changing nothing. Binds at once
        for new calls; calls already running finish; kept for a restart and the site's next
        grant (committed before it returns; a store that cannot keep it is logged); told to
        whoever watches the grants."""
        grant = self.grants.get(grant_id)
        if grant is None:
            raise GrantRefusal("unknown-grant", "no live grant has this id")
        now = self._clock()
        given = changed_grant(grant, choices, now)
        try:
            rebuilt = build_grant(grant.origin, grant.manifest, given, now, grant.id)
        except GrantRefusal as refusal:
            raise ChoiceRefusal(
                refusal.errors or [{"code": refusal.code, "path": "", "message": str(refusal)}]
            ) from None
        grant.take_terms_of(rebuilt)
        self.grants.update(grant)
        kept = KeptChoices(self.sites.database)
        before = kept.get(grant.origin)
        if choices.expires_in_minutes is not None:
            before = {"expiresInMinutes": choices.expires_in_minutes}
        try:  # committed before it returns: the site's next grant reads it at once
            kept.keep(grant.origin, kept_choices(grant, before)).result()
        except (StoreError, sqlite3.Error, OSError) as error:
            log.error("event=choices-not-kept origin=%s error=%r", grant.origin, str(error))
        self.record_activity(
            kind="change",
            origin=grant.origin,
            grant=grant.id,
            outcome="ok",
            limits=grant.summary()["limits"],
            models=sorted(grant.models) or None,
        )
        self._tell_grant(grant)
        return grant.summary()

    def change_site(self, origin: Any, choices: VisitorChoices) -> list[dict[str, Any]]:
        """:meth:`change_grant` for every live grant of ``origin``, all or none: the first
        refusal changes nothing. Their summaries (none when it holds no live grant)."""
        grants = self.grants.of_origin(self._origin(origin))
        now = self._clock()
        for grant in grants:  # every one checked before any changes
            changed_grant(grant, choices, now)
        return [self.change_grant(grant.id, choices) for grant in grants]

    def tell_site_changed(self, origin: str) -> None:
        """The visitor paused or resumed ``origin``: tell whoever watches each of its grants."""
        for grant in self.grants.of_origin(origin):
            self._tell_grant(grant)

    def site_grant(self, grant: Grant) -> dict[str, Any]:
        """The grant as the site sees it now (:func:`grant_object`), ``paused`` while the
        visitor has paused the site."""
        summary = grant.summary()
        return grant_object(
            grant.skills,
            grant.expires_at,
            summary["limits"],
            summary.get("models", ()),
            paused=self._site_state(grant.origin) == "paused",
        )

    def watch_grants(self, watcher: GrantWatcher) -> Callable[[], None]:
        """Tell ``watcher(grant_id, site_grant | None)`` of every change of a live grant from
        now on (None: it ended); the function that stops telling it."""
        self._grant_watchers.append(watcher)

        def stop() -> None:
            if watcher in self._grant_watchers:
                self._grant_watchers.remove(watcher)

        return stop

    def _tell_grant(self, grant: Grant, *, ended: bool = False) -> None:
        told = None if ended else self.site_grant(grant)
        for watcher in list(self._grant_watchers):
            try:
                watcher(grant.id, told)
            except Exception:  # a watcher's failure must not stop the change
                log.exception("event=grant-watcher-failed")

    # -- calls ----------------------------------------------------------------------------

    async def call(
        self,
        grant_id: Any,
        skill: Any,
        skill_input: Any,
        params: Any = None,
        deadline: Any = None,
        on_chunk: ChunkHook | None = None,
    ) -> CallResult:
        """Answer one call under a grant: a refusal (with the gate's reasons), or the skill's
        answer with the grant's deadline applied; a streamed text answer's pieces go to
        ``on_chunk``. A call cancelled while it runs (its caller went away) frees its slot."""
        began = time.monotonic()
        grant = self.grants.get(grant_id)
        if grant is None:
            result = self._refused(skill, began, "unknown-grant", "no live grant has this id")
        elif (site := self._site_state(grant.origin)) != "active":
            result = self._refused(skill, began, f"site-{site}", _site_message(site))
        else:  # the engine runs the call through the grant's gate, and reports it
            gate = _GrantGate(
                grant, self.grants, self._pricing, self._clock, self._ask, self.judges
            )
            result = await self.engine.call(
                skill, skill_input, params, deadline, on_chunk, gate=gate
            )
        elapsed = time.monotonic() - began
        entry = {
            "kind": "call",
            "origin": grant.origin if grant else None,
            "grant": _shown(grant_id),
            "skill": _shown(skill),
            "decision": result.decision,
            "outcome": result.code or "ok",
            "codes": [r["code"] for r in result.reasons or []],
            "latencyMs": round(elapsed * 1000, 1),
        }
        entry.update(result.measured)
        if "model" in result.facts:
            entry["model"] = result.facts["model"]
        for fact in ("judge", "judgeDecision", "judgeModel", "judgeCost"):
            if fact in result.facts:
                entry[fact] = result.facts[fact]
        if result.receipt:
            entry["cost"] = result.receipt.get("cost")
        self.record_activity(**entry)
        return result

    def _refused(self, skill: Any, began: float, code: str, message: str) -> CallResult:
        """A call refused before the engine sees it, reported as the engine reports a call."""
        refusal = CallResult.refused(code, message)
        self.engine.report(skill, refusal, time.monotonic() - began)
        return refusal

    def _site_state(self, origin: str) -> str:
        """The site's state; ``unreadable`` (refused: fail closed) when the list is damaged."""
        try:
            return self.sites.state(origin)
        except (SiteListError, OSError) as error:
            log.error("event=site-list-unreadable error=%r", str(error))
            return "unreadable"

    @staticmethod
    def _origin(origin: Any) -> str:
        try:
            return normalize_origin(origin)
        except (ValueError, TypeError, AttributeError):
            raise GrantRefusal(
                "origin-invalid", "the origin must be scheme://host[:port]"
            ) from None

    def watch_activity(self, watcher: Callable[[dict[str, Any]], None]) -> None:
        """Tell ``watcher`` of every activity entry from now on, as it is recorded."""
        self._watchers.append(watcher)

    def record_activity(self, **entry: Any) -> None:
        """Add one activity entry (entries with None values lose those keys); a failure to
        write is logged and never stops a call."""
        kept = {"time": rfc3339(self._clock())}
        kept.update((k, v) for k, v in entry.items() if v is not None)
        try:
            self.activity.record(kept)
        except (OSError, StoreError) as error:  # the log must never stop a call
            log.error("event=activity-write-failed error=%r", str(error))
            return
        for watcher in self._watchers:
            watcher(kept)


def _site_message(state: str) -> str:
    if state == "unreadable":
        return "the site list cannot be read; no site is served until it can"
    return f"the visitor has {state} this site"


class _GrantGate:
    """One call's gate under ``grant`` (:class:`~byoa_skills.skills.CallGate`): the shim's
    pricing, the gate's check-and-record, and the real cost in place of the reservation."""

    def __init__(
        self,
        grant: Grant,
        grants: GrantStore,
        pricing: Pricing,
        clock: Callable[[], int],
        ask: AskHook,
        judges: JudgeSwitch | None = None,
    ) -> None:
        self._grant = grant
        self._judges = judges
        self._grants = grants
        self._pricing = pricing
        self._clock = clock
        self._ask = ask
        self._admission: Admission | None = None

    @property
    def terms(self) -> GrantTerms:
        """The grant's terms."""
        return self._grant.terms

    async def admit(self, call: PreparedCall) -> Admitted | CallResult:
        """Price the call, decide it under the grant's lock and record it when it may run."""
        grant = self._grant
        priced = self._pricing(call)
        provider, estimate = await priced if inspect.isawaitable(priced) else priced
        measured = Measured(
            call.skill, call.params, call.measured, provider, estimate, uses_models=call.uses_models
        )
        admission = await admit(grant, measured, self._clock(), self._ask)
        if not admission.admitted:
            return CallResult(
                ok=False,
                code=admission.code,
                message=admission.message,
                decision=admission.decision,
                reasons=admission.reasons,
            )
        self._admission = admission
        self._grants.save_record(grant)
        if admission.decision == "warn":
            log.warning(
                "event=gate-warn grant=%s codes=%s",
                grant.id,
                ",".join(r["code"] for r in admission.reasons),
            )
        return Admitted(admission.decision, admission.reasons)

    async def supervise(
        self, call: PreparedCall, run: Run, on_chunk: ChunkHook | None
    ) -> CallResult:
        """Run the call; a call of a judged skill (``text.generate``) of a site the purpose judge
        is on for runs beside the judge (:func:`~byoa_skills.wallet_shim.judged.judged_run`),
        or after it where the call's source costs money."""
        judge = None
        if self._judges is not None and judged(call.skill) and call.messages:
            judge = await self._judges.judge_for(self._grant.origin)
        if judge is None:
            return await run(on_chunk)
        judge_first = self._judges.paid(call.model)  # never pay for a call then refused
        return await judged_run(judge, self._grant, call, run, on_chunk, self._ask, judge_first)

    def finish(self, result: CallResult | None) -> None:
        """The receipt's cost replaces the reservation (all of it, for a call cut short)."""
        if self._admission is None:
            return
        estimate = self._admission.estimate
        finish(
            self._grant, self._admission, estimate if result is None else _cost_of(result, estimate)
        )
        self._grants.save_record(self._grant)


def _cost_of(result: CallResult, estimate: Decimal) -> Decimal:
    """The receipt's cost; the reservation when there is no readable receipt."""
    cost = (result.receipt or {}).get("cost")
    try:
        return Decimal(str(cost).split()[0])
    except (InvalidOperation, IndexError):
        return estimate


def _shown(value: Any) -> Any:
    """A value from the caller, cut short for the log."""
    return value[:100] if isinstance(value, str) else None
