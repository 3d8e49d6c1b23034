"""A paired platform's calls: only the skills in its registration's scope, through the shim.

A registration becomes a grant for the platform's origin (its issuer) of the skills in its
scope this engine serves now (a call of another one of them: ``no-fitting-model``; the grant
is asked again, and widened, once it is served), asked of the one grant decision
(``consent/decision.py``) as an Allow the visitor gave when pairing: the site's live grant
when it holds one (as the visitor narrowed it), else one made with the visitor's kept choices
for that origin (limits, budget, expiry), for at most a day at a time, with no budget to
spend (its manifest states no cost; local models cost nothing): the platform is in the site
list under that origin (``sites pause|block`` work as for any site), and every call passes
the shim's gate and limits; a text call that names no model goes to the first model ticked
for it (:func:`named_model`). Before that, a skill outside the scope is refused with
``outside-registration-scope``, and a platform with no registration here (never paired, or
revoked) with ``not-registered``, and a ``text.generate`` call while no text source answers
with a model with ``no-fitting-model`` (no grant is made for it).
"""

from __future__ import annotations

from typing import Any

from byoa_skills.byoag.registrations import Registration, RegistrationStore
from byoa_skills.consent.decision import PLATFORM, Asking, GrantDecision
from byoa_skills.consent.desk import ALLOW
from byoa_skills.runtimes.text import ChunkHook
from byoa_skills.skills import CallResult
from byoa_skills.skills.registry import uses_models
from byoa_skills.store.clock import now_ms
from byoa_skills.store.origins import normalize_origin
from byoa_skills.wallet_shim.grants import GrantRefusal
from byoa_skills.wallet_shim.shim import WalletShim

OUTSIDE_SCOPE = "outside-registration-scope"
NOT_REGISTERED = "not-registered"


def registration_manifest(registration: Registration) -> dict[str, Any]:
    """The manifest the shim reads for a registration: its scope as the skills."""
    return {
        "byoa": "0.1-draft",
        "purpose": {"summary": f"Platform paired through BYOAg: {registration.platform}"},
        "skills": {skill: {"required": False} for skill in registration.scope},
        "privacy": "personal",
    }


def named_model(params: Any, code: str) -> Any:
    """``params`` naming the model ``code`` when they name none: a platform knows no model
    codes (it gets no hello), so its text calls go to the first model the visitor ticked for
    it, never to another (a call that names a model is left as it is, and checked)."""
    if params is None:
        return {"model": code}
    if isinstance(params, dict) and params.get("model") is None:
        return {**params, "model": code}
    return params


class RegistrationCalls:
    """Answers the calls of paired platforms within their registrations' scope."""

    def __init__(
        self,
        shim: WalletShim,
        registrations: RegistrationStore | None = None,
        decision: GrantDecision | None = None,
    ) -> None:
        self.shim = shim
        self.registrations = registrations or RegistrationStore()
        #: The one grant decision (shared with the other ways in).
        self.decision = decision or GrantDecision(shim)
        #: registration id -> (grant id, when it was asked for in milliseconds).
        self._grants: dict[str, tuple[str, int]] = {}

    async def call(
        self,
        platform: Any,
        skill: Any,
        skill_input: Any,
        params: Any = None,
        deadline: Any = None,
        on_chunk: ChunkHook | None = None,
    ) -> CallResult:
        """Answer one call of the platform named ``platform`` (as it was paired): refused
        unless it holds a registration whose scope has ``skill``; then as the shim answers
        (a streamed text answer's pieces go to ``on_chunk``)."""
        registration = self.registrations.get(platform) if isinstance(platform, str) else None
        if registration is None:
            return self._refused(
                None, skill, NOT_REGISTERED, "this platform holds no registration here"
            )
        if skill not in registration.scope:
            return self._refused(
                registration.issuer,
                skill,
                OUTSIDE_SCOPE,
                "the skill is outside the registration's scope",
            )
        if uses_models(skill) and not await self.shim.engine.fits(skill, {}):
            return self._refused(
                registration.issuer,
                skill,
                "no-fitting-model",
                "no text source answers with a model",
            )
        try:
            grant_id = await self._grant_for(registration, skill)
        except GrantRefusal as refusal:
            return self._refused(registration.issuer, skill, refusal.code, refusal.message)
        grant = self.shim.grants.get(grant_id)
        if grant is not None and skill not in grant.skills:  # in its scope, not served here
            return self._refused(
                registration.issuer,
                skill,
                "no-fitting-model",
                "no model here serves this skill now",
            )
        if uses_models(skill) and grant is not None and grant.models:
            params = named_model(params, next(iter(grant.models)))
        return await self.shim.call(grant_id, skill, skill_input, params, deadline, on_chunk)

    async def _grant_for(self, registration: Registration, skill: str) -> str:
        """The grant the platform's calls run under: the one it holds while it lives (and
        not within a minute of its end) and has ``skill``, else the one grant decision's (the
        same grant given the skills of its scope this engine serves now)."""
        now = now_ms()
        held = self._grants.get(registration.registration_id)
        live = self.shim.grants.get(held[0]) if held is not None else None
        if live is not None and now < live.expires_ms - 60_000:
            if skill in live.skills:
                return live.id
            live = None  # asked again: a skill it lacked may be served now
        if live is not None:
            self.shim.release_grant(live.id)
        try:
            origin = normalize_origin(registration.issuer)
        except ValueError:
            raise GrantRefusal("origin-invalid", "the platform's origin is not valid") from None
        decided = await self.decision.decide(
            origin, registration_manifest(registration), Asking(PLATFORM, decided=ALLOW)
        )
        if decided.grant is None:
            raise GrantRefusal(str(decided.code), "the platform gets no grant")
        self._grants[registration.registration_id] = (str(decided.grant["grantId"]), now)
        return str(decided.grant["grantId"])

    def _refused(self, origin: str | None, skill: Any, code: str, message: str) -> CallResult:
        self.shim.record_activity(
            kind="call",
            origin=origin,
            outcome=code,
            skill=skill if isinstance(skill, str) else None,
        )
        return CallResult.refused(code, message)
