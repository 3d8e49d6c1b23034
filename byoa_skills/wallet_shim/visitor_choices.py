"""What the visitor chooses for a site, at consent and later on the Sites view: the models
ticked, limits stricter than the manifest's, a budget of their own and a shorter expiry.

A limit may only be made stricter: its value must not be above its *ceiling*, the manifest's
value or, where the manifest states none, the wallet's own (:data:`WALLET_CEILINGS`). A wider
value is refused ``limit-wider``; the budget is the visitor's own (any amount, in the
manifest's currency); the expiry may only come sooner (``expiry-later``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from byoa_skills.protocol.refusal import Refusal
from byoa_skills.skills.text_generate import MAX_ANSWER_TOKENS, MAX_TEXT_CHARS
from byoa_skills.wallet_shim.limits import (
    DEFAULT_MAX_PARALLEL_CALLS,
    MAX_CALLS_PER_MINUTE,
    WALLET_CALL_SECONDS,
    limit_problem,
)
from byoa_skills.wav import MAX_CLIP_SECONDS

#: The limits a visitor may set, and the wallet's own value of each: the ceiling where the
#: manifest states none.
WALLET_CEILINGS: dict[str, float] = {
    "maxCallsPerMinute": MAX_CALLS_PER_MINUTE,
    "maxParallelCalls": DEFAULT_MAX_PARALLEL_CALLS,
    "maxClipSeconds": MAX_CLIP_SECONDS,
    "maxTextChars": MAX_TEXT_CHARS,
    "maxAnswerTokens": MAX_ANSWER_TOKENS,
    "maxCallSeconds": WALLET_CALL_SECONDS,
}
#: The limits a visitor may set.
VISITOR_LIMITS = tuple(WALLET_CEILINGS)
#: The longest a grant may be given for, in minutes (a day: what an Allow gives).
MAX_EXPIRY_MINUTES = 24 * 60
_FIELDS = ("models", "limits", "budget", "expiresInMinutes")


class ChoiceRefusal(Refusal):
    """Choices the wallet cannot take, with each problem ``{code, path, message}``."""

    def __init__(self, problems: list[dict[str, str]]) -> None:
        super().__init__(problems[0]["code"], problems[0]["message"])
        self.problems = problems


@dataclass(frozen=True)
class VisitorChoices:
    """The visitor's choices for one grant. ``models`` is None when the visitor ticked nothing
    (no page to tick on, or no text skill), else what was ticked: ``SOURCE/MODEL`` at consent,
    the codes kept (``m1``...) on a change. ``limits`` holds only the limits the visitor set
    (None: taken back to the manifest's, on a change)."""

    models: tuple[str, ...] | None = None
    limits: Mapping[str, float | None] = field(default_factory=dict)
    budget: str | None = None
    expires_in_minutes: float | None = None

    def to_json(self) -> dict[str, Any]:
        """As the page posts them (and as they are kept for the site)."""
        shown: dict[str, Any] = {"limits": dict(self.limits)}
        if self.models is not None:
            shown["models"] = list(self.models)
        if self.budget is not None:
            shown["budget"] = self.budget
        if self.expires_in_minutes is not None:
            shown["expiresInMinutes"] = self.expires_in_minutes
        return shown


def read_choices(body: Any) -> VisitorChoices:
    """The choices a page or the CLI sends (``{models?, limits?, budget?, expiresInMinutes?}``,
    all optional), their form checked; :class:`ChoiceRefusal` ``choices-invalid`` /
    ``unknown-limit`` / ``limit-invalid``. Whether they are stricter is
    :func:`choice_problems`'s to say."""
    if body is None:
        return VisitorChoices()
    if not isinstance(body, dict):
        raise ChoiceRefusal([_problem("choices-invalid", "", "the choices must be an object")])
    problems = [
        _problem("choices-invalid", f"/{key}", f"unknown field {key!r}")
        for key in body
        if key not in _FIELDS
    ]
    models = body.get("models")
    if models is not None and not (
        isinstance(models, list)
        and len(models) <= 16
        and all(isinstance(m, str) and 0 < len(m) <= 300 for m in models)
    ):
        problems.append(_problem("choices-invalid", "/models", "models must be a list of names"))
        models = None
    limits = body.get("limits") or {}
    if not isinstance(limits, dict):
        problems.append(_problem("choices-invalid", "/limits", "limits must be an object"))
        limits = {}
    kept: dict[str, float | None] = {}
    for name, value in limits.items():
        if name not in WALLET_CEILINGS:
            problems.append(
                _problem(
                    "unknown-limit", f"/limits/{name}", f"{name!r} is not a limit the visitor sets"
                )
            )
        elif value is None:
            kept[name] = None
        elif (problem := limit_problem(name, value)) is not None or not math.isfinite(value):
            problems.append(_problem("limit-invalid", f"/limits/{name}", problem or "a number"))
        else:
            kept[name] = value
    budget = body.get("budget")
    if budget is not None and _money(budget) is None:
        problems.append(
            _problem(
                "budget-invalid",
                "/budget",
                "the budget is an amount and a currency, such as 0.50 USD",
            )
        )
    minutes = body.get("expiresInMinutes")
    if minutes is not None and not (
        isinstance(minutes, (int, float))
        and not isinstance(minutes, bool)
        and math.isfinite(minutes)
        and minutes > 0
    ):
        problems.append(
            _problem(
                "expiry-invalid",
                "/expiresInMinutes",
                "expiresInMinutes must be a number of minutes above 0",
            )
        )
    if problems:
        raise ChoiceRefusal(problems)
    return VisitorChoices(
        models=None if models is None else tuple(models),
        limits=kept,
        budget=None if budget is None else " ".join(str(budget).split()),
        expires_in_minutes=None if minutes is None else float(minutes),
    )


def ceiling(manifest: Mapping[str, Any], name: str) -> float:
    """The value limit ``name`` may not go above: the manifest's, or the wallet's own."""
    purpose = manifest.get("purpose")
    limits = purpose.get("limits") if isinstance(purpose, dict) else None
    value = limits.get(name) if isinstance(limits, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return min(float(value), WALLET_CEILINGS[name])
    return WALLET_CEILINGS[name]


def ceilings(manifest: Mapping[str, Any]) -> dict[str, float]:
    """Every limit the visitor may set and its ceiling under ``manifest``."""
    return {name: ceiling(manifest, name) for name in VISITOR_LIMITS}


def choice_problems(
    manifest: Mapping[str, Any],
    choices: VisitorChoices,
    *,
    latest_expiry_minutes: float,
    currency: str,
) -> list[dict[str, str]]:
    """Why ``choices`` are not stricter than ``manifest`` allows: ``limit-wider`` for a limit
    above its :func:`ceiling`, ``budget-invalid`` for a budget in another currency than
    ``currency``, ``expiry-later`` for an expiry after ``latest_expiry_minutes`` from now."""
    problems = [
        _problem(
            "limit-wider",
            f"/limits/{name}",
            f"{name} {_number(value)} is wider than {_number(ceiling(manifest, name))}",
        )
        for name, value in choices.limits.items()
        if value is not None and value > ceiling(manifest, name)
    ]
    if choices.budget is not None:
        money = _money(choices.budget)
        if money is None or money[1] != currency:
            problems.append(
                _problem("budget-invalid", "/budget", f"the budget must be in {currency}")
            )
    minutes = choices.expires_in_minutes
    if minutes is not None and minutes > latest_expiry_minutes + 1e-9:
        problems.append(
            _problem(
                "expiry-later",
                "/expiresInMinutes",
                f"it may end sooner, not later: at most {_number(latest_expiry_minutes)} min",
            )
        )
    return problems


def _money(value: Any) -> tuple[Decimal, str] | None:
    if not isinstance(value, str):
        return None
    parts = value.split()
    if len(parts) != 2 or not parts[1].isalpha() or not parts[1].isupper():
        return None
    try:
        amount = Decimal(parts[0])
    except InvalidOperation:
        return None
    if not amount.is_finite() or amount < 0 or len(parts[0]) > 20:
        return None
    return amount, parts[1]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _problem(code: str, path: str, message: str) -> dict[str, str]:
    return {"code": code, "path": path, "message": message}
