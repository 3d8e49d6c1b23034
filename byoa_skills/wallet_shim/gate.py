"""The shim's gate: the reference ``check_call`` plus the wallet's own limits, and the one-at-a
-time check-and-record of each grant (the execution contract of the reference rules).

For each call, under the grant's lock: the reference gate decides from the measured call and
the grant's spend; the rate rule (C11) is counted here from the grant's window of call times,
in amortised O(1) per call, with the reference's code, message and place among the reasons;
the shim adds its own reasons (parallel calls, answer tokens, models); a call that may run is
recorded at once (its time, its worst-case cost reserved, one more in flight). When the call
ends its real cost replaces the reservation. So under any interleaving the spend, with every
running call's reservation, never passes the budget, and the rate limit counts every call
admitted.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from bringyourownagent import DECISIONS, check_call
from bringyourownagent.rules import RATE_WINDOW_MS

from byoa_skills.store.clock import rfc3339
from byoa_skills.wallet_shim.grants import Grant

_SEVERITY = {decision: rank for rank, decision in enumerate(DECISIONS)}

#: ``ask_hook(grant, call, reasons)``: whether the visitor approves a call the gate would ask
#: about (may be async); a string instead is the code of a refusal to ask at all (too many
#: waiting). The local API has no one to ask and declines.
AskHook = Callable[
    [Grant, dict[str, Any], list[dict[str, Any]]], bool | str | Awaitable[bool | str]
]


def decline(grant: Grant, call: dict[str, Any], reasons: list[dict[str, Any]]) -> bool:
    """The default ask hook: no one to ask, so no."""
    return False


@dataclass(frozen=True)
class Measured:
    """What the shim measured of a call, and how it would be paid."""

    skill: str
    params: dict[str, Any]
    #: What the engine measured of the input, as the protocol names it (``clipSeconds``...).
    input: Mapping[str, float]
    provider: str
    estimate: Decimal
    #: Whether the grant's ``models`` block applies (a call that must name a model).
    uses_models: bool = False


@dataclass(frozen=True)
class Admission:
    """The gate's answer: ``admitted``, the decision and every reason (reference and shim),
    and for a refusal the code of the reason that decided it."""

    admitted: bool
    decision: str
    reasons: list[dict[str, Any]]
    code: str | None = None
    message: str | None = None
    estimate: Decimal = Decimal(0)


async def admit(grant: Grant, call: Measured, now_ms: int, ask: AskHook = decline) -> Admission:
    """Decide one call and, when it may run, record it against the grant."""
    async with grant.lock:
        first = _decide(grant, call, now_ms)
        if first.decision in ("allowed", "warn"):
            return _record(grant, call, now_ms, first)
        if first.decision == "blocked":
            return first
    approved = ask(grant, _reference_call(grant, call, now_ms), first.reasons)
    if inspect.isawaitable(approved):
        approved = await approved
    if isinstance(approved, str):  # not asked: refused with the hook's code
        return Admission(
            False,
            first.decision,
            first.reasons,
            approved,
            "the visitor is already being asked about this site's calls",
        )
    if approved is not True:
        return first
    async with grant.lock:  # the record may have changed while the visitor was asked
        again = _decide(grant, call, now_ms)
        if again.decision == "blocked":
            return again
        return _record(grant, call, now_ms, again)


def finish(grant: Grant, admission: Admission, real_cost: Decimal) -> None:
    """Record the end of an admitted call: its real cost in place of the reservation."""
    grant.reserved -= admission.estimate
    grant.spent += real_cost
    grant.in_flight -= 1


def _decide(grant: Grant, call: Measured, now_ms: int) -> Admission:
    state = {"spent": f"{format(grant.spent + grant.reserved, 'f')} {grant.currency}"}
    result = check_call(
        grant.manifest, grant.reference, _reference_call(grant, call, now_ms), state
    )
    reasons = [dict(reason) for reason in result["reasons"]]
    _add_rate_reason(reasons, grant, now_ms)
    reasons += _shim_reasons(grant, call)
    decision = max((r["decision"] for r in reasons), key=_SEVERITY.__getitem__, default="allowed")
    if decision in ("allowed", "warn"):
        return Admission(True, decision, reasons)
    deciding = next(r for r in reasons if r["decision"] == decision)
    return Admission(False, decision, reasons, deciding["code"], deciding["message"])


def recent_calls(grant: Grant, now_ms: int) -> int:
    """How many admitted calls of ``grant`` fall in the rate window ending at ``now_ms``, as the
    reference rule C11 counts them (``now - 60 s < t <= now``); times that left the window are
    dropped. Amortised O(1): each time is added once and dropped once."""
    times = grant.call_times
    while times and times[0] <= now_ms - RATE_WINDOW_MS:
        times.popleft()
    later = 0  # times after now: only when the clock went back
    while later < len(times) and times[-1 - later] > now_ms:
        later += 1
    return len(times) - later


def _add_rate_reason(reasons: list[dict[str, Any]], grant: Grant, now_ms: int) -> None:
    """The reference rule C11 (``maxCallsPerMinute``), counted here from the grant's window
    rather than by handing the reference gate every call time of the last minute: the same
    code, message and place among the reasons (after C5-C10, before C12-C16). Nothing when
    the reference gate stopped at its input checks, as it would not have counted."""
    if grant.rate_limit is None or any(r["code"] in _NO_RATE_REASON for r in reasons):
        return  # (a limit of 0 the reference gate refuses itself, with no call times)
    recent = recent_calls(grant, now_ms)
    if recent < grant.rate_limit:
        return
    reason = {
        "code": "rate-exceeded",
        "decision": "blocked",
        "message": f"{recent} calls in the last minute; the limit is "
        f"{_number(grant.rate_limit)} per minute",
    }
    at = next((i for i, r in enumerate(reasons) if r["code"] in _AFTER_RATE), len(reasons))
    reasons.insert(at, reason)


#: The reference gate's codes for inputs it cannot read (it decides nothing else then), and its
#: own rate reason.
_NO_RATE_REASON = frozenset(
    {"manifest-invalid", "grant-invalid", "call-invalid", "state-invalid", "rate-exceeded"}
)
#: The codes of the reference rules after C11 (C12-C16), which follow a rate reason.
_AFTER_RATE = frozenset(
    {"currency-mismatch", "budget-exceeded", "text-sent", "call-cost-high", "spend-high"}
)


def _number(value: float) -> str:
    """A number as the reference gate writes it in a message."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _record(grant: Grant, call: Measured, now_ms: int, decided: Admission) -> Admission:
    grant.call_times.append(now_ms)
    grant.calls += 1
    grant.reserved += call.estimate
    grant.in_flight += 1
    grant.peak_in_flight = max(grant.peak_in_flight, grant.in_flight)
    return Admission(True, decided.decision, decided.reasons, estimate=call.estimate)


def _reference_call(grant: Grant, call: Measured, now_ms: int) -> dict[str, Any]:
    """The call as the reference gate reads it, with the shim's measurements."""
    measured: dict[str, Any] = {"clipSeconds": 0, "textChars": 0, **call.input}
    return {
        "skill": call.skill,
        "at": rfc3339(now_ms),
        "provider": call.provider,
        "estimatedCost": f"{format(call.estimate, 'f')} {grant.currency}",
        "input": measured,
    }


def _shim_reasons(grant: Grant, call: Measured) -> list[dict[str, Any]]:
    """The wallet's own limits, which the reference gate does not know."""
    reasons = []

    def block(code: str, message: str) -> None:
        reasons.append({"code": code, "decision": "blocked", "message": message})

    limit = grant.limits.max_parallel_calls
    if grant.in_flight >= limit:
        block(
            "too-many-parallel-calls", f"{grant.in_flight} calls are running; the limit is {limit}"
        )
    tokens = call.params.get("maxTokens")
    ceiling = grant.limits.max_answer_tokens
    if ceiling is not None and isinstance(tokens, int) and tokens > ceiling:
        block(
            "answer-tokens-exceeded", f"the call asks for {tokens} tokens; the limit is {ceiling}"
        )
    model = call.params.get("model")
    if model is not None and model not in grant.models:
        block("model-not-granted", f"model {str(model)[:20]!r} is not one the visitor ticked")
    elif model is None and call.uses_models and (grant.models or grant.has_models_block):
        block(  # under a models block, never the visitor's default model
            "model-not-granted",
            "the call names no model; the grant lists " + (", ".join(grant.models) or "none"),
        )
    return reasons
