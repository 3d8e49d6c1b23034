"""The site guide's rules for a page's ``window.byoa``: ``request`` (a grant, or null),
``call`` (``{ok: true, output}`` or ``{ok: false}``) and ``release``.

The origin is the one the browser gave the extension, never one the page wrote. A request
counts only after a click, unless the visitor lets the wallet decide on its own for the site;
it is shown on the wallet page's consent with only what the site does not already hold.
Every "no" (declined, blocked, paused, no click, no fitting model, no answer in 120 s) is the
same null for the page; its reason goes to the activity log.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from byoa_skills.consent.decision import REQUEST, Asking, GrantDecision
from byoa_skills.consent.desk import ConsentDesk
from byoa_skills.consent.scope import manifest_problems
from byoa_skills.protocol.refusal import Refusal
from byoa_skills.store.clock import now_ms
from byoa_skills.store.origins import normalize_origin
from byoa_skills.wallet_shim.grants import Grant
from byoa_skills.wallet_shim.shim import WalletShim

log = logging.getLogger("byoa_skills.extension")

#: The largest manifest a page may send, as UTF-8 JSON: what a link may carry.
MAX_MANIFEST_BYTES = 4096
#: The hosts a plain ``http`` page may ask from (the extension runs there for tests).
LOCAL_HOSTS = ("localhost", "127.0.0.1")
#: What the page gets for every "no" of a call.
NO_CALL: dict[str, Any] = {"ok": False}


class Refused(Refusal):
    """A request that gets null; ``code`` is the reason kept in the activity log, with the
    codes of what it found (a manifest's problems, what a request asks for beyond its
    scope) in ``details``."""

    def __init__(self, code: str, details: list[str] | None = None) -> None:
        super().__init__(code, code, text=code)
        self.details = details or []


class PageRequests:
    """``request``, ``call`` and ``release`` of pages, through the same sites, consents,
    grants and limits as every other way in."""

    def __init__(
        self,
        shim: WalletShim,
        consents: ConsentDesk | None,
        decision: GrantDecision | None = None,
    ) -> None:
        self.shim = shim
        #: Where a request is shown to the visitor (the wallet page); None: every one is null.
        self.consents = consents
        #: The one grant decision (shared with the other ways in).
        self.decision = decision or GrantDecision(shim, consents)

    async def request(
        self, origin: Any, manifest: Any, user_activation: Any
    ) -> dict[str, Any] | None:
        """The grant ``{grantId, skills, expiresAt, limits, models?}`` for a page's
        ``request`` (models by code only), or None. The reason for a None is kept in the
        activity log only."""
        shown = origin[:100] if isinstance(origin, str) else None
        log.info("event=request origin=%s clicked=%s", shown, user_activation is True)
        try:
            origin = page_origin(origin)
            shown = origin
            grant = await self._request(origin, manifest, user_activation is True)
        except Refused as refused:
            found = {"codes": refused.details} if refused.details else {}
            self.shim.record_activity(kind="request", origin=shown, outcome=refused.code, **found)
            log.info("event=request-refused origin=%s code=%s", shown, refused.code)
            return None
        self.shim.record_activity(
            kind="request",
            origin=origin,
            grant=grant["grantId"],
            outcome="ok",
            skills=grant["skills"],
        )
        live = self.shim.grants.get(grant["grantId"])
        told = self.shim.site_grant(live) if live is not None else {}
        return {"grantId": grant["grantId"], **told}

    async def call(
        self, origin: Any, grant_id: Any, skill: Any, skill_input: Any, params: Any
    ) -> dict[str, Any]:
        """``{ok: true, output, grant}`` or ``{ok: false, grant}`` for a page's ``call``, with
        the grant as it is now (the visitor may have changed it), and ``{ok: false}`` alone
        once it has ended (released, or its expiry reached); a grant is used only from the
        origin it was given to (``{ok: false}`` from another)."""
        grant = self._own_grant(origin, grant_id)
        if grant is None:
            self.shim.record_activity(
                kind="call",
                origin=_origin_or_none(origin),
                skill=_shown(skill),
                outcome="not-this-origin",
            )
            return NO_CALL
        result = await self.shim.call(grant.id, skill, skill_input, params)
        live = self.shim.grants.get(grant.id)  # as it is now: the visitor may have changed it
        if live is not None and live.expires_ms <= now_ms():  # expired: it has ended
            live = None
        told = None if live is None else {"grantId": live.id, **self.shim.site_grant(live)}
        if result.ok and isinstance(result.output, dict):
            return {"ok": True, "output": result.output, "grant": told}
        return NO_CALL if told is None else {**NO_CALL, "grant": told}

    def release(self, origin: Any, grant_id: Any) -> bool:
        """Release a grant of ``origin`` (its page left, or said so); False when it holds no
        such live grant."""
        grant = self._own_grant(origin, grant_id)
        return grant is not None and self.shim.release_grant(grant.id)

    async def _request(self, origin: str, manifest: Any, clicked: bool) -> dict[str, Any]:
        """The one grant decision's answer for a page (see
        :class:`~byoa_skills.consent.decision.GrantDecision`), translated: its grant, or
        :class:`Refused` with its code."""
        if not isinstance(manifest, dict):
            raise Refused("manifest-invalid")
        if len(json.dumps(manifest, ensure_ascii=False).encode("utf-8")) > MAX_MANIFEST_BYTES:
            raise Refused("manifest-too-large")
        if manifest_problems(manifest):  # nothing is shown of a manifest that breaks the rules
            codes = sorted({str(problem["code"]) for problem in manifest_problems(manifest)})
            raise Refused(codes[0] if codes == ["limit-invalid"] else "manifest-invalid", codes)
        if not self.shim.engine.ready:
            raise Refused("engine-not-ready")
        self.shim.engine.wake()  # the workers warm while the visitor decides
        decided = await self.decision.decide(origin, manifest, Asking(REQUEST, may_ask=clicked))
        if decided.grant is None:
            raise Refused(str(decided.code), decided.details)
        return decided.grant

    def _own_grant(self, origin: Any, grant_id: Any) -> Grant | None:
        grant = self.shim.grants.get(grant_id)
        if grant is None or grant.origin != _origin_or_none(origin):
            return None
        return grant


def page_origin(origin: Any) -> str:
    """The page's origin as the site list names it: ``https``, or ``http`` on localhost or
    127.0.0.1 (the pages the extension runs on); raises :class:`Refused` otherwise."""
    try:
        normalized = normalize_origin(origin)
    except (ValueError, TypeError):
        raise Refused("origin-invalid") from None
    scheme, _, rest = normalized.partition("://")
    host = rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest
    if scheme != "https" and host not in LOCAL_HOSTS:
        raise Refused("origin-invalid")
    return normalized


def _origin_or_none(origin: Any) -> str | None:
    try:
        return page_origin(origin)
    except Refused:
        return None


def _shown(value: Any) -> Any:
    return value[:100] if isinstance(value, str) else None
