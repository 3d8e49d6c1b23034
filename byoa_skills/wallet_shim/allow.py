"""The grant an Allow gives, the same for every way in: a link (``directlink/``), a page's
``request`` (``extension/``) and a paired platform's registration (``byoag/``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from byoa_skills.store.clock import now_ms, rfc3339

#: How long a grant an Allow gives lasts, in seconds: a day.
ALLOW_GRANT_SECONDS = 24 * 3600


def allow_grant(
    manifest: Mapping[str, Any], skills: Iterable[str], at_ms: int | None = None
) -> dict[str, Any]:
    """The grant an Allow gives from ``at_ms`` (default: now): ``skills``, in the order
    given; the manifest's expected session cost as the budget (``0 USD`` when it states
    none); for :data:`ALLOW_GRANT_SECONDS`. The manifest's limits apply through the gate."""
    cost = manifest.get("expectedCost")
    budget = cost.get("perSession") if isinstance(cost, dict) else None
    start = now_ms() if at_ms is None else at_ms
    return {
        "byoa": "0.1-draft",
        "skills": list(skills),
        "budget": {"perSession": budget if isinstance(budget, str) else "0 USD"},
        "expiresAt": rfc3339(start + ALLOW_GRANT_SECONDS * 1000),
    }
