"""A live grant made stricter by the visitor: the grant as it will be given from now on.

The limits the visitor sends replace those they set before, one by one (``null`` takes one
back to the manifest's); ``models`` lists the codes to keep (the others are unticked, and a
code keeps the model it names); the budget is replaced; the expiry may only come sooner.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from byoa_skills.store.clock import rfc3339
from byoa_skills.wallet_shim.visitor_choices import ChoiceRefusal, VisitorChoices, choice_problems

if TYPE_CHECKING:
    from byoa_skills.wallet_shim.grants import Grant


def changed_grant(grant: Grant, choices: VisitorChoices, now_ms: int) -> dict[str, Any]:
    """What ``grant`` is given as once ``choices`` apply; :class:`ChoiceRefusal` when a limit
    is wider than the manifest allows (``limit-wider``), the budget is in another currency
    (``budget-invalid``), the expiry would come later (``expiry-later``) or a code to keep is
    not one of the grant's (``model-not-granted``)."""
    left_minutes = max(0.0, (grant.expires_ms - now_ms) / 60_000)
    problems = choice_problems(grant.manifest, choices, latest_expiry_minutes=left_minutes,
                               currency=grant.currency)  # fmt: skip
    if choices.models is not None:
        problems += [
            {"code": "model-not-granted", "path": f"/models/{index}",
             "message": f"{code[:20]!r} is not a model code of this grant"}
            for index, code in enumerate(choices.models) if code not in grant.models
        ]  # fmt: skip
    if problems:
        raise ChoiceRefusal(problems)
    given = copy.deepcopy(grant.given)
    limits = dict(given.get("limits") or {})
    for name, value in choices.limits.items():
        if value is None:
            limits.pop(name, None)
        else:
            limits[name] = value
    if limits:
        given["limits"] = limits
    else:
        given.pop("limits", None)
    if choices.models is not None:
        kept = {code: grant.models[code] for code in choices.models}
        given["models"] = kept
        if not kept:
            given.pop("models", None)
    if choices.budget is not None:
        given["budget"] = {"perSession": choices.budget}
    if choices.expires_in_minutes is not None:
        given["expiresAt"] = rfc3339(now_ms + int(choices.expires_in_minutes * 60_000))
    return given


def kept_choices(grant: Grant) -> dict[str, Any]:
    """What is kept for the site once the visitor changed ``grant`` (the document of
    :class:`~byoa_skills.store.visitor_choices.KeptChoices`): its limits, models and budget,
    for the site's next grant made without a consent."""
    document: dict[str, Any] = {"limits": dict(grant.given.get("limits") or {})}
    if grant.models:
        document["models"] = list(grant.models.values())
    budget = grant.given.get("budget", {}).get("perSession")
    if isinstance(budget, str):
        document["budget"] = budget
    return document
