"""The limits the wallet 0.1 enforces beyond the reference gate's, and their effective values.

The reference rules know ``maxCallsPerMinute``, ``maxClipSeconds`` and ``maxTextChars``; the
wallet adds ``maxParallelCalls``, ``maxCallSeconds`` and ``maxAnswerTokens``. Each may be set
by the manifest (``purpose.limits``) and by the grant (``limits``); the stricter one applies.
The wallet also caps what either may declare for ``maxCallsPerMinute``
(:data:`MAX_CALLS_PER_MINUTE`), so that the rate window it keeps per grant stays small.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: The limits this module handles; the reference gate never sees them.
SHIM_LIMITS = ("maxParallelCalls", "maxCallSeconds", "maxAnswerTokens")
#: The wallet's parallel-call limit when neither the manifest nor the grant states one.
DEFAULT_MAX_PARALLEL_CALLS = 8
#: The wallet's deadline for any call, in seconds; ``maxCallSeconds`` may only shorten it.
WALLET_CALL_SECONDS = 120.0
_LARGEST_COUNT = 2**53 - 1
#: The most a manifest or a grant may declare for ``maxCallsPerMinute`` (20 calls a second);
#: a larger value is refused ``limit-invalid``.
MAX_CALLS_PER_MINUTE = 1200


@dataclass(frozen=True)
class ShimLimits:
    """The wallet's own limits in force for one grant."""

    max_parallel_calls: int = DEFAULT_MAX_PARALLEL_CALLS
    max_call_seconds: float = WALLET_CALL_SECONDS
    max_answer_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        """As a hello or a grant answer states them."""
        limits: dict[str, Any] = {
            "maxParallelCalls": self.max_parallel_calls,
            "maxCallSeconds": self.max_call_seconds,
        }
        if self.max_answer_tokens is not None:
            limits["maxAnswerTokens"] = self.max_answer_tokens
        return limits


def limit_problem(name: str, value: Any) -> str | None:
    """Why ``value`` is not a valid ``name`` limit, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"limit {name!r} must be a number"
    if name == "maxCallSeconds":
        if not (math.isfinite(value) and value > 0):
            return f"limit {name!r} must be a number of seconds above 0"
        return None
    if not (float(value).is_integer() and 1 <= value <= _LARGEST_COUNT):
        return f"limit {name!r} must be a whole number from 1"
    return None


def problems_in(limits: Any, base_path: str) -> list[dict[str, str]]:
    """Problems ``{code, path, message}`` with the shim's limits in a limits object."""
    if not isinstance(limits, dict):
        return []
    found = []
    for name in SHIM_LIMITS:
        if name in limits:
            problem = limit_problem(name, limits[name])
            if problem:
                found.append(
                    {"code": "limit-invalid", "path": f"{base_path}/{name}", "message": problem}
                )
    return found


def rate_problems(limits: Any, base_path: str) -> list[dict[str, str]]:
    """A ``limit-invalid`` problem when a limits object declares a ``maxCallsPerMinute`` above
    :data:`MAX_CALLS_PER_MINUTE` (any other flaw of the value is the reference rules' to
    find)."""
    if not isinstance(limits, dict):
        return []
    value = limits.get("maxCallsPerMinute")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return []
    if value <= MAX_CALLS_PER_MINUTE:
        return []
    return [
        {
            "code": "limit-invalid",
            "path": f"{base_path}/maxCallsPerMinute",
            "message": f"limit 'maxCallsPerMinute' may be at most {MAX_CALLS_PER_MINUTE}",
        }
    ]


def stricter(manifest_limits: Any, grant_limits: Any, name: str) -> Any:
    """The smaller of the manifest's and the grant's value of limit ``name``, or None when
    neither states it (both limits objects already checked)."""
    values = [
        limits[name]
        for limits in (manifest_limits, grant_limits)
        if isinstance(limits, dict) and limits.get(name) is not None
    ]
    return min(values) if values else None


def effective_limits(manifest_limits: Any, grant_limits: Any) -> ShimLimits:
    """The stricter of the manifest's and the grant's value of each limit (both valid)."""
    parallel = stricter(manifest_limits, grant_limits, "maxParallelCalls")
    seconds = stricter(manifest_limits, grant_limits, "maxCallSeconds")
    tokens = stricter(manifest_limits, grant_limits, "maxAnswerTokens")
    return ShimLimits(
        max_parallel_calls=DEFAULT_MAX_PARALLEL_CALLS if parallel is None else int(parallel),
        max_call_seconds=min(WALLET_CALL_SECONDS, float(seconds or WALLET_CALL_SECONDS)),
        max_answer_tokens=None if tokens is None else int(tokens),
    )
