"""The grant an Allow gives, the same for every way in: a link (``directlink/``), a page's
``request`` (``extension/``) and a paired platform's registration (``byoag/``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from byoa_skills.store.clock import now_ms, rfc3339
from byoa_skills.wallet_shim.visitor_choices import VisitorChoices

#: How long a grant an Allow gives lasts, in seconds: a day.
ALLOW_GRANT_SECONDS = 24 * 3600


def allow_grant(
    manifest: Mapping[str, Any],
    skills: Iterable[str],
    at_ms: int | None = None,
    *,
    choices: VisitorChoices | None = None,
    models: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The grant an Allow gives from ``at_ms`` (default: now): ``skills``, in the order
    given; the visitor's budget, else the manifest's expected session cost (``0 USD`` when it
    states none); for :data:`ALLOW_GRANT_SECONDS` or the sooner expiry the visitor chose; the
    limits the visitor set (the manifest's apply through the gate as well: the stricter
    binds); the models ticked, by code (``m1`` → ``SOURCE/MODEL``), when there are any."""
    cost = manifest.get("expectedCost")
    budget = cost.get("perSession") if isinstance(cost, dict) else None
    start = now_ms() if at_ms is None else at_ms
    seconds = float(ALLOW_GRANT_SECONDS)
    if choices is not None and choices.expires_in_minutes is not None:
        seconds = min(seconds, choices.expires_in_minutes * 60)
    grant: dict[str, Any] = {
        "byoa": "0.1-draft",
        "skills": list(skills),
        "budget": {"perSession": budget if isinstance(budget, str) else "0 USD"},
        "expiresAt": rfc3339(start + int(seconds * 1000)),
    }
    if choices is not None:
        if choices.budget is not None:
            grant["budget"] = {"perSession": choices.budget}
        limits = {name: value for name, value in choices.limits.items() if value is not None}
        if limits:
            grant["limits"] = limits
    if models:
        grant["models"] = dict(models)
    return grant
