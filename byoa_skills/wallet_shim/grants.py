"""Grants: what the visitor allowed a site, checked once when the wallet hands it over, and
the spend, call times and calls in flight recorded against it while it lives."""

from __future__ import annotations

import asyncio
import re
import secrets
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from functools import cached_property
from typing import Any

from bringyourownagent import KNOWN_LIMITS, check_call, validate_manifest

from byoa_skills.protocol.refusal import Refusal
from byoa_skills.skills.registry import KNOWN_SKILLS
from byoa_skills.skills.terms import GrantTerms
from byoa_skills.store.clock import rfc3339
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.grant_rows import (
    GrantRecord,
    GrantRow,
    delete_grants,
    insert_grant,
    read_grants,
    update_given,
    update_record,
)
from byoa_skills.wallet_shim.limits import (
    MAX_CALLS_PER_MINUTE,
    SHIM_LIMITS,
    ShimLimits,
    effective_limits,
    problems_in,
    rate_problems,
    stricter,
)

#: Grant fields the shim reads itself and removes before the reference gate sees the grant.
SHIM_FIELDS = ("models",)
_MODEL_CODE = re.compile(r"m[1-9][0-9]{0,2}")


class GrantRefusal(Refusal):
    """A manifest or grant the wallet cannot take: a code and the problems found, each
    ``{code, path, message}`` with a JSON Pointer path (the reference package's shape)."""

    def __init__(self, code: str, message: str, errors: list[dict[str, str]] | None = None):
        super().__init__(code, message)
        self.errors = errors or []


@dataclass
class Grant:
    """One live grant and its running record. The record changes only under ``lock``."""

    id: str
    origin: str
    manifest: dict[str, Any]
    #: The grant as the reference gate reads it: without the shim's limits and fields.
    reference: dict[str, Any]
    limits: ShimLimits
    #: The models the visitor ticked, by code (m1, m2...): the model each code names.
    models: dict[str, str]
    currency: str
    spent: Decimal = Decimal(0)
    reserved: Decimal = Decimal(0)
    #: The effective ``maxCallsPerMinute``, when one applies.
    rate_limit: int | None = None
    #: When the calls of the last minute were admitted (milliseconds), oldest first; never
    #: more than the rate limit's ceiling, since only admitted calls are kept.
    call_times: deque[int] = field(default_factory=lambda: deque(maxlen=MAX_CALLS_PER_MINUTE))
    in_flight: int = 0
    #: The most calls that ever ran at once under this grant.
    peak_in_flight: int = 0
    #: Calls admitted under this grant in its whole life.
    calls: int = 0
    #: The grant as the visitor gave it (what the grant is built again from after a restart).
    given: dict[str, Any] = field(default_factory=dict, repr=False)
    #: When the grant was taken, in milliseconds since the epoch.
    created_ms: int = 0
    #: When it expires (its ``expiresAt``), in milliseconds since the epoch.
    expires_ms: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    @property
    def skills(self) -> list[str]:
        """The skills granted."""
        return list(self.reference["skills"])

    @property
    def has_models_block(self) -> bool:
        """Whether the manifest gives a granted skill a ``models`` block: then a call names
        one of the models the visitor ticked, never the default model."""
        skills = self.manifest.get("skills")
        return isinstance(skills, dict) and any(
            isinstance(skills.get(name), dict) and skills[name].get("models") is not None
            for name in self.skills
        )

    @property
    def expires_at(self) -> str:
        """When the grant ends (RFC 3339)."""
        return str(self.reference["expiresAt"])

    @cached_property
    def terms(self) -> GrantTerms:
        """What a skill sees of this grant: the limits in force and the models ticked."""
        manifest_limits = self.manifest["purpose"].get("limits")
        grant_limits = self.reference.get("limits")
        clip = stricter(manifest_limits, grant_limits, "maxClipSeconds")
        chars = stricter(manifest_limits, grant_limits, "maxTextChars")
        return GrantTerms(
            max_call_seconds=self.limits.max_call_seconds,
            max_clip_seconds=None if clip is None else float(clip),
            max_text_chars=None if chars is None else int(chars),
            max_answer_tokens=self.limits.max_answer_tokens,
            models=self.models,
        )

    def record(self) -> dict[str, Any]:
        """The running record: spend (settled, and reserved by running calls), calls in the
        last minute's window as last checked, calls running now and at most."""
        return {
            "spent": f"{format(self.spent, 'f')} {self.currency}",
            "reserved": f"{format(self.reserved, 'f')} {self.currency}",
            "calls": self.calls,
            "recentCalls": len(self.call_times),
            "inFlight": self.in_flight,
            "peakInFlight": self.peak_in_flight,
        }

    def summary(self) -> dict[str, Any]:
        """What the wallet is told when the grant is taken; ``limits`` are those in force
        (the stricter of manifest and grant), as a hello states them."""
        manifest_limits = self.manifest["purpose"].get("limits")
        limits = {
            name: value
            for name in KNOWN_LIMITS
            if (value := stricter(manifest_limits, self.reference.get("limits"), name)) is not None
        }
        limits.update(self.limits.to_json())
        summary: dict[str, Any] = {
            "grantId": self.id,
            "skills": self.skills,
            "expiresAt": self.expires_at,
            "limits": limits,
        }
        if self.models:
            summary["models"] = sorted(self.models, key=_code_order)
        return summary

    def take_terms_of(self, changed: Grant) -> None:
        """Take the terms of ``changed`` (this grant rebuilt from what the visitor changed):
        its grant, limits, models, rate limit and expiry; the running record stays. Calls
        already admitted finish under the terms they took."""
        self.reference = changed.reference
        self.limits = changed.limits
        self.models = changed.models
        self.currency = changed.currency
        self.rate_limit = changed.rate_limit
        self.given = changed.given
        self.expires_ms = changed.expires_ms
        self.__dict__.pop("terms", None)


def _code_order(code: str) -> int:
    return int(code[1:]) if code[1:].isdigit() else 0


def build_grant(
    origin: str, manifest: Any, grant: Any, now_ms: int, grant_id: str | None = None
) -> Grant:
    """Check a manifest and a grant the visitor gave; a :class:`Grant` or a refusal.

    The manifest is validated by the reference package; the grant is read by the reference
    gate (through a probe call that decides nothing), after the shim's own limits and
    fields are taken out of it.
    """
    checked = validate_manifest(manifest)
    if not checked["ok"]:
        raise GrantRefusal("manifest-invalid", "the manifest breaks the rules", checked["errors"])
    manifest_limits = manifest["purpose"].get("limits")
    problems = problems_in(manifest_limits, "/purpose/limits")
    problems += rate_problems(manifest_limits, "/purpose/limits")
    if not isinstance(grant, dict):
        raise GrantRefusal("grant-invalid", "the grant must be a JSON object")
    reference, shim_limits, models = _split(grant)
    problems += problems_in(shim_limits, "/limits") + _model_problems(models)
    problems += rate_problems(reference.get("limits"), "/limits")
    problems += _reference_grant_problems(manifest, reference, now_ms)
    if problems:
        raise GrantRefusal(
            problems[0]["code"] if len(problems) == 1 else "grant-invalid",
            problems[0]["message"],
            problems,
        )
    for index, skill in enumerate(reference["skills"]):
        if manifest["skills"].get(skill) is None:
            raise GrantRefusal(
                "skill-not-declared",
                f"skill {skill!r} is granted but not declared in the manifest",
                [
                    {
                        "code": "skill-not-declared",
                        "path": f"/skills/{index}",
                        "message": f"skill {skill!r} is not in the manifest",
                    }
                ],
            )
    return Grant(
        id=grant_id or secrets.token_urlsafe(16),
        origin=origin,
        manifest=manifest,
        reference=reference,
        limits=effective_limits(manifest_limits, shim_limits),
        models=dict(models or {}),
        currency=reference["budget"]["perSession"].split()[-1],
        rate_limit=stricter(manifest_limits, reference.get("limits"), "maxCallsPerMinute"),
        given=grant,
        created_ms=now_ms,
        expires_ms=_expiry_ms(reference["expiresAt"], now_ms),
    )


def _split(grant: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """(the grant for the reference gate, the shim's limits, the models block)."""
    reference = {key: value for key, value in grant.items() if key not in SHIM_FIELDS}
    shim_limits: dict[str, Any] = {}
    limits = grant.get("limits")
    if isinstance(limits, dict):
        shim_limits = {k: v for k, v in limits.items() if k in SHIM_LIMITS}
        reference["limits"] = {k: v for k, v in limits.items() if k not in SHIM_LIMITS}
        if not reference["limits"]:
            del reference["limits"]
    return reference, shim_limits, grant.get("models")


def _model_problems(models: Any) -> list[dict[str, str]]:
    if models is None:
        return []
    if not isinstance(models, dict) or not models:
        message = '"models" must be an object such as {"m1": "provider/model"}'
        return [{"code": "grant-invalid", "path": "/models", "message": message}]
    return [
        {
            "code": "grant-invalid",
            "path": f"/models/{code}",
            "message": f"model code {code!r} must be m1, m2... naming a model",
        }
        for code, model in models.items()
        if not (_MODEL_CODE.fullmatch(str(code)) and isinstance(model, str) and model.strip())
    ]


def _reference_grant_problems(
    manifest: dict[str, Any], reference: dict[str, Any], now_ms: int
) -> list[dict[str, str]]:
    """The reference gate's ``grant-invalid`` findings, from a probe call it only reads."""
    skills = reference.get("skills")
    any_skill = KNOWN_SKILLS[0]  # the probe only reads the grant: any skill the engine knows
    probe_skill = skills[0] if isinstance(skills, list) and skills else any_skill
    budget = reference.get("budget")
    money = budget.get("perSession") if isinstance(budget, dict) else None
    currency = money.split()[-1] if isinstance(money, str) and money.split() else "USD"
    probe = {
        "skill": probe_skill if isinstance(probe_skill, str) else any_skill,
        "at": rfc3339(now_ms),
        "provider": "local-model",
        "estimatedCost": f"0 {currency}",
        "input": {"clipSeconds": 0, "textChars": 0},
    }
    result = check_call(manifest, reference, probe)
    problems = [
        {"code": "grant-invalid", "path": reason.get("path", ""), "message": reason["message"]}
        for reason in result["reasons"]
        if reason["code"] == "grant-invalid"
    ]
    if not problems and any(r["code"] == "grant-expired" for r in result["reasons"]):
        problems.append(
            {"code": "grant-expired", "path": "/expiresAt", "message": "the grant has expired"}
        )
    return problems


class GrantStore:
    """The live grants, by id, kept in the wallet's database so that they outlive a restart:
    a site that still holds a live ``grantId`` goes on calling within its limits and its
    remaining budget. Every change is queued for the database's writer; the event loop never
    waits on the disk. Without a database the grants live only in memory."""

    def __init__(self, database: WalletDatabase | None = None) -> None:
        self.database = database
        self._grants: dict[str, Grant] = {}

    def add(self, grant: Grant) -> None:
        """Keep a grant that was just built."""
        self._grants[grant.id] = grant
        if self.database is None:
            return
        row = GrantRow(
            id=grant.id,
            origin=grant.origin,
            manifest=grant.manifest,
            given=grant.given,
            limits=grant.summary()["limits"],
            currency=grant.currency,
            created_ms=grant.created_ms,
            expires_ms=grant.expires_ms,
        )
        self.database.submit(lambda db: insert_grant(db, row))

    def replace(self, grant: Grant) -> None:
        """Keep ``grant`` again as a whole (its manifest and terms changed, its id and running
        record the same): written over the kept row, record included."""
        if grant.id not in self._grants:
            return
        self.add(grant)
        self.save_record(grant)

    def newest_of(self, origin: str) -> Grant | None:
        """The site's newest live grant, or None."""
        held = self.of_origin(origin)
        return max(held, key=lambda grant: grant.created_ms) if held else None

    def update(self, grant: Grant) -> None:
        """Queue what the visitor changed of a live grant (given, limits, expiry)."""
        if self.database is None or grant.id not in self._grants:
            return
        grant_id, given, expires_ms = grant.id, dict(grant.given), grant.expires_ms
        limits = grant.summary()["limits"]
        self.database.submit(lambda db: update_given(db, grant_id, given, limits, expires_ms))

    def get(self, grant_id: Any) -> Grant | None:
        """The live grant with this id, or None."""
        return self._grants.get(grant_id) if isinstance(grant_id, str) else None

    def release(self, grant_id: str) -> Grant | None:
        """Forget a grant (calls already running finish); the grant, or None if unknown."""
        grant = self._grants.pop(grant_id, None) if isinstance(grant_id, str) else None
        if grant is not None and self.database is not None:
            self.database.submit(lambda db: delete_grants(db, [grant_id]))
        return grant

    def of_origin(self, origin: str) -> list[Grant]:
        """The live grants of one site."""
        return [grant for grant in self._grants.values() if grant.origin == origin]

    def all(self) -> list[Grant]:
        """Every live grant."""
        return list(self._grants.values())

    def save_record(self, grant: Grant) -> None:
        """Queue the grant's running record (calls, spend, reservations, call times)."""
        if self.database is None or grant.id not in self._grants:
            return
        record = GrantRecord(  # the call times: at most the rate ceiling; JSON made by the writer
            calls=grant.calls,
            in_flight=grant.in_flight,
            reserved=grant.reserved,
            spent=grant.spent,
            call_times=tuple(grant.call_times),
            peak_in_flight=grant.peak_in_flight,
        )
        grant_id = grant.id
        self.database.submit(lambda db: update_record(db, grant_id, record))

    def load(self, now_ms: int) -> int:
        """Take back the grants the database keeps (at start, before any call); how many.

        Expired grants, and any that no longer pass the checks, are removed. Calls that were
        running when the engine stopped are over: what they had reserved counts as spent
        (they may have cost it), so the budget still binds."""
        if self.database is None:
            return 0
        kept = self.database.read(read_grants)
        gone = list(kept.unreadable)
        for row in kept.rows:
            if row.expires_ms <= now_ms:
                gone.append(row.id)
                continue
            try:
                grant = build_grant(row.origin, row.manifest, row.given, now_ms, row.id)
            except (GrantRefusal, ValueError):
                gone.append(row.id)
                continue
            record = row.record
            grant.created_ms = row.created_ms
            grant.calls = record.calls
            grant.spent = record.spent + record.reserved
            grant.call_times.extend(record.call_times)
            grant.peak_in_flight = record.peak_in_flight
            self._grants[grant.id] = grant
            self.save_record(grant)
        if gone:
            self.database.submit(lambda db: delete_grants(db, gone))
        return len(self._grants)

    def prune(self, now_ms: int) -> list[Grant]:
        """Forget the grants that have expired; them."""
        expired = [grant for grant in self._grants.values() if grant.expires_ms <= now_ms]
        for grant in expired:
            self.release(grant.id)
        return expired


def _expiry_ms(expires_at: Any, now_ms: int) -> int:
    """``expiresAt`` (RFC 3339, checked by the reference rules) in milliseconds; a day from
    now in the unlikely case Python cannot read it."""
    text = str(expires_at).replace("Z", "+00:00").replace("z", "+00:00")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return now_ms + 24 * 3600 * 1000
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)
