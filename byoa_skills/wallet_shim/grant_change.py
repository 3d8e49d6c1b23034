"""A live grant made stricter by the visitor: the grant as it will be given from now on.

The limits the visitor sends replace those they set before, one by one (``null`` takes one
back to the manifest's); ``models`` lists the codes to keep (the others are unticked, and a
code keeps the model it names); the budget is replaced; the expiry may only come sooner.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from byoa_skills.skills.registry import uses_models
from byoa_skills.store.clock import rfc3339
from byoa_skills.wallet_shim.models_block import read_block
from byoa_skills.wallet_shim.visitor_choices import ChoiceRefusal, VisitorChoices, choice_problems

if TYPE_CHECKING:
    from byoa_skills.wallet_shim.grants import Grant


def changed_grant(grant: Grant, choices: VisitorChoices, now_ms: int) -> dict[str, Any]:
    """What ``grant`` is given as once ``choices`` apply; :class:`ChoiceRefusal` when a limit
    is wider than the manifest allows (``limit-wider``), the budget is in another currency
    (``budget-invalid``), the expiry would come later (``expiry-later``) or a code to keep is
    not one of the grant's (``model-not-granted``)."""
    left_minutes = max(0.0, (grant.expires_ms - now_ms) / 60_000)
    problems = choice_problems(
        grant.manifest, choices, latest_expiry_minutes=left_minutes, currency=grant.currency
    )
    if choices.models is not None:
        problems += [
            {
                "code": "model-not-granted",
                "path": f"/models/{index}",
                "message": f"{code[:20]!r} is not a model code of this grant",
            }
            for index, code in enumerate(choices.models)
            if code not in grant.models
        ]
        required = _required(grant)
        if len(set(choices.models)) < required:
            problems.append(
                {
                    "code": "too-few-models",
                    "path": "/models",
                    "message": f"the site needs at least {required} model(s) "
                    "ticked; release the grant to end it",
                }
            )
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


def _required(grant: Grant) -> int:
    """How many ticked models the grant's text skill requires (0 when it has none)."""
    if not any(uses_models(name) for name in grant.skills) or not grant.models:
        return 0
    block = read_block(grant.manifest)
    return 0 if block is None else block.required


def kept_choices(grant: Grant, before: Any = None) -> dict[str, Any]:
    """What is kept for the site once the visitor changed ``grant`` (the document of
    :class:`~byoa_skills.store.visitor_choices.KeptChoices`): its limits, models and budget,
    and the expiry kept ``before`` (the document it replaces), for the site's next grant
    made without a consent."""
    document: dict[str, Any] = {"limits": dict(grant.given.get("limits") or {})}
    if grant.models:
        document["models"] = list(grant.models.values())
    budget = grant.given.get("budget", {}).get("perSession")
    if isinstance(budget, str):
        document["budget"] = budget
    minutes = before.get("expiresInMinutes") if isinstance(before, dict) else None
    if isinstance(minutes, (int, float)) and not isinstance(minutes, bool):
        document["expiresInMinutes"] = minutes  # the visitor's expiry holds
    return document
