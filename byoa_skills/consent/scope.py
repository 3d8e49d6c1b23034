"""What a manifest asks for, as a scope that can be compared and widened: the purpose's
summary, the skills (with their languages and models blocks), the purpose's limits, the
budget per session and the privacy class.

"Decide on my own" lets a site come back for what the visitor already allowed, never for
more: :func:`more_than` says what a manifest asks for beyond a scope, and
:func:`difference_manifest` writes that difference as a manifest for the consent to show.
A scope is plain JSON (:meth:`Scope.to_json`), so that the wallet's database keeps it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from bringyourownagent import validate_manifest

from byoa_skills.wallet_shim.limits import problems_in, rate_problems
from byoa_skills.wallet_shim.models_block import block_problems

#: A skill's languages: the codes it names, or None for a skill that names none (any).
Languages = frozenset[str] | None


@dataclass(frozen=True)
class Scope:
    """What one or more manifests the visitor allowed ask for, at its widest."""

    #: Skill name → the languages allowed for it (None: any language).
    skills: dict[str, Languages] = field(default_factory=dict)
    #: Skill name → the JSON text of each ``models`` block allowed for it.
    models: dict[str, frozenset[str]] = field(default_factory=dict)
    #: Limit name → the largest value allowed; a name absent here was allowed without limit.
    limits: dict[str, float] = field(default_factory=dict)
    #: Currency → the largest budget per session allowed in it.
    budgets: dict[str, Decimal] = field(default_factory=dict)
    #: The privacy classes allowed.
    privacy: frozenset[str] = frozenset()
    #: The purposes (``purpose.summary``, as written) allowed: another one is more.
    purposes: frozenset[str] = frozenset()

    @classmethod
    def of(cls, manifest: dict[str, Any]) -> Scope:
        """The scope of one manifest (one that passed :func:`manifest_problems`)."""
        skills: dict[str, Languages] = {}
        models: dict[str, frozenset[str]] = {}
        for name, entry in _skills(manifest).items():
            skills[name] = _languages(entry)
            block = entry.get("models") if isinstance(entry, dict) else None
            if block is not None:
                models[name] = frozenset({_canonical(block)})
        limits = _limits(manifest)
        budget = _budget(manifest)
        return cls(
            skills=skills,
            models=models,
            limits=limits,
            budgets={budget[1]: budget[0]},
            privacy=frozenset({str(manifest.get("privacy", ""))}),
            purposes=frozenset({_summary(manifest)}),
        )

    def widened(self, other: Scope) -> Scope:
        """The widest of both: what either allowed is allowed."""
        skills = dict(self.skills)
        for name, languages in other.skills.items():
            if name not in skills:
                skills[name] = languages
            elif skills[name] is None or languages is None:
                skills[name] = None
            else:
                skills[name] = skills[name] | languages  # type: ignore[operator]
        models = dict(self.models)
        for name, blocks in other.models.items():
            models[name] = models.get(name, frozenset()) | blocks
        limits = {  # a limit is kept only where both had it
            name: max(value, other.limits[name])
            for name, value in self.limits.items()
            if name in other.limits
        }
        budgets = dict(self.budgets)
        for currency, amount in other.budgets.items():
            budgets[currency] = max(budgets.get(currency, amount), amount)
        return Scope(
            skills,
            models,
            limits,
            budgets,
            self.privacy | other.privacy,
            self.purposes | other.purposes,
        )

    def to_json(self) -> dict[str, Any]:
        """The scope as the database keeps it."""
        return {
            "skills": {
                name: None if languages is None else sorted(languages)
                for name, languages in sorted(self.skills.items())
            },
            "models": {name: sorted(blocks) for name, blocks in sorted(self.models.items())},
            "limits": dict(sorted(self.limits.items())),
            "budgets": {currency: str(amount) for currency, amount in self.budgets.items()},
            "privacy": sorted(self.privacy),
            "purposes": sorted(self.purposes),
        }

    @classmethod
    def from_json(cls, data: Any) -> Scope | None:
        """A scope :meth:`to_json` wrote; None for anything else (nothing is then allowed). A
        scope kept before purposes were kept allows no purpose: the next one is a consent."""
        try:
            skills = {
                str(name): None if langs is None else frozenset(str(code) for code in langs)
                for name, langs in data["skills"].items()
            }
            models = {str(k): frozenset(str(b) for b in v) for k, v in data["models"].items()}
            limits = {str(name): float(value) for name, value in data["limits"].items()}
            budgets = {str(c): Decimal(str(v)) for c, v in data["budgets"].items()}
            privacy = frozenset(str(p) for p in data["privacy"])
            purposes = frozenset(str(p) for p in data.get("purposes", ()))
        except (KeyError, TypeError, AttributeError, ValueError, InvalidOperation):
            return None
        if not all(value == value and abs(value) != float("inf") for value in limits.values()):
            return None
        return cls(skills, models, limits, budgets, privacy, purposes)


@dataclass(frozen=True)
class More:
    """What a manifest asks for beyond a scope; empty (falsy) when the scope covers it."""

    #: Skills not allowed at all.
    skills: tuple[str, ...] = ()
    #: Skill → languages not allowed for it (an empty tuple: the skill now names none, any).
    languages: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Skills whose ``models`` block is not one allowed.
    models: tuple[str, ...] = ()
    #: Limit → the manifest's looser value (None: the manifest drops the limit).
    limits: dict[str, Any] = field(default_factory=dict)
    #: The budget per session, when it is more than allowed (or in another currency).
    budget: str | None = None
    #: The privacy class, when it is not one allowed.
    privacy: str | None = None
    #: Whether nothing was allowed before: then the whole manifest is new.
    first: bool = False
    #: The purpose's summary, when it is not one allowed.
    purpose: str | None = None
    #: The purposes allowed before (shown beside a new one).
    held_purposes: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(
            self.skills
            or self.languages
            or self.models
            or self.limits
            or self.budget is not None
            or self.privacy is not None
            or self.purpose is not None
        )

    def codes(self) -> list[str]:
        """What is more, one word each (for the activity log): ``skill``, ``language``,
        ``model``, ``limit``, ``budget``, ``privacy``, ``purpose``."""
        parts = {
            "skill": self.skills,
            "language": self.languages,
            "model": self.models,
            "limit": self.limits,
            "budget": self.budget,
            "privacy": self.privacy,
            "purpose": self.purpose,
        }
        return [word for word, value in parts.items() if value]


def manifest_problems(manifest: Any) -> list[dict[str, str]]:
    """Every reason to refuse a manifest before anything is shown: the reference rules
    (``validate_manifest``) and the wallet's own on its limits; ``[]`` when it may be shown.
    Each problem is ``{code, path, message}``."""
    checked = validate_manifest(manifest)
    if not checked["ok"]:
        return [dict(error) for error in checked["errors"]]
    limits = manifest["purpose"].get("limits")
    return (
        problems_in(limits, "/purpose/limits")
        + rate_problems(limits, "/purpose/limits")
        + block_problems(manifest)
    )


def more_than(scope: Scope | None, manifest: dict[str, Any]) -> More:
    """What ``manifest`` asks for beyond ``scope`` (everything, when there is no scope)."""
    first = scope is None
    if scope is None:
        scope = Scope()
    asked = Scope.of(manifest)
    skills, languages, models = [], {}, []
    for name, wanted in asked.skills.items():
        if name not in scope.skills:
            skills.append(name)
            continue
        allowed = scope.skills[name]
        if allowed is not None:
            if wanted is None:
                languages[name] = ()
            elif wanted - allowed:
                languages[name] = tuple(sorted(wanted - allowed))
        if name in asked.models and not asked.models[name] <= scope.models.get(name, frozenset()):
            models.append(name)
    limits: dict[str, Any] = {}
    for name in sorted(scope.limits):
        if name not in asked.limits:
            limits[name] = None
        elif asked.limits[name] > scope.limits[name]:
            limits[name] = manifest["purpose"]["limits"][name]  # as the manifest writes it
    budget = None
    ((currency, amount),) = asked.budgets.items()
    if currency not in scope.budgets or amount > scope.budgets[currency]:
        budget = _money_text(manifest)
    (privacy,) = asked.privacy
    (purpose,) = asked.purposes
    return More(
        skills=tuple(sorted(skills)),
        languages=languages,
        models=tuple(sorted(models)),
        limits=limits,
        budget=budget,
        privacy=None if privacy in scope.privacy else privacy,
        first=first,
        purpose=None if purpose in scope.purposes else purpose,
        held_purposes=tuple(sorted(scope.purposes)),
    )


def difference_manifest(manifest: dict[str, Any], more: More) -> dict[str, Any]:
    """``manifest`` cut to what :class:`More` names, for the consent to show: the purpose's
    summary and the privacy class as they are, the skills (or the new languages and models of
    a skill) beyond the scope, the limits it loosens, and the cost only when it is more.
    When nothing was allowed before (:attr:`More.first`), that is the whole manifest."""
    if more.first:
        return manifest
    skills: dict[str, Any] = {}
    for name, entry in _skills(manifest).items():
        entry = entry if isinstance(entry, dict) else {}
        if name in more.skills:
            skills[name] = entry
        elif name in more.languages or name in more.models:
            part = {
                key: value for key, value in entry.items() if key not in ("languages", "models")
            }
            if more.languages.get(name):
                part["languages"] = list(more.languages[name])
            if name in more.models:
                part["models"] = entry.get("models")
            skills[name] = part
    purpose = manifest.get("purpose") if isinstance(manifest.get("purpose"), dict) else {}
    limits = {name: "none" if value is None else value for name, value in more.limits.items()}
    shown: dict[str, Any] = {
        "purpose": {"summary": purpose.get("summary", ""), "limits": limits},
        "skills": skills,
        "privacy": manifest.get("privacy", ""),
    }
    if more.budget is not None:
        shown["expectedCost"] = {"perSession": more.budget}
    return shown


def _skills(manifest: dict[str, Any]) -> dict[str, Any]:
    skills = manifest.get("skills")
    return skills if isinstance(skills, dict) else {}


def _summary(manifest: dict[str, Any]) -> str:
    purpose = manifest.get("purpose")
    summary = purpose.get("summary") if isinstance(purpose, dict) else None
    return summary if isinstance(summary, str) else ""


def _languages(entry: Any) -> Languages:
    languages = entry.get("languages") if isinstance(entry, dict) else None
    if not isinstance(languages, list) or not languages:
        return None
    return frozenset(str(code).lower() for code in languages)


def _limits(manifest: dict[str, Any]) -> dict[str, float]:
    purpose = manifest.get("purpose")
    limits = purpose.get("limits") if isinstance(purpose, dict) else None
    if not isinstance(limits, dict):
        return {}
    return {
        str(name): float(value)
        for name, value in limits.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }


def _money_text(manifest: dict[str, Any]) -> str:
    cost = manifest.get("expectedCost")
    money = cost.get("perSession") if isinstance(cost, dict) else None
    return money if isinstance(money, str) else "0 USD"


def _budget(manifest: dict[str, Any]) -> tuple[Decimal, str]:
    """The manifest's expected cost per session as (amount, currency): the budget an Allow
    gives; ``0 USD`` when it states none."""
    parts = _money_text(manifest).split()
    try:
        return Decimal(parts[0]), parts[-1]
    except (IndexError, InvalidOperation):
        return Decimal(0), "USD"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
