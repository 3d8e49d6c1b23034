"""Where an engine call's time goes: the mean milliseconds of each part of the wait a client
saw, and its share of that wait, from the engine's ``Server-Timing`` of each call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from byoa_skills.bench.server import Timed
from byoa_skills.runtimes.speech.base import PHASES

#: The parts of a call's wait, in the order a call meets them: the queue; the model's phases
#: (:data:`~byoa_skills.runtimes.speech.base.PHASES`); ``worker``, the model's time outside
#: them (tokenizer, the batch's bookkeeping); ``handoff``, the pool around the model (shared
#: memory, the worker's pipe); ``api``, what is left: HTTP, JSON, base64, the WAV check.
PARTS = ("queue", *PHASES, "worker", "handoff", "api")


def parts_of(call: Timed) -> dict[str, float]:
    """The seconds of each of :data:`PARTS` in one call's wait (they add up to it)."""
    phases = {name: call.timing.get(name, 0.0) for name in PHASES}
    handoff = call.timing.get("handoff", 0.0)
    return {
        "queue": call.queue,
        **phases,
        "worker": max(0.0, call.infer - sum(phases.values())),
        "handoff": handoff,
        "api": max(0.0, call.waited - call.queue - call.infer - handoff),
    }


def phase_split(calls: Sequence[Timed]) -> dict[str, Any]:
    """Over ``calls``: their number, the mean wait (ms), each part's mean (ms) and its share of
    the mean wait."""
    if not calls:
        return {"calls": 0, "waited_ms": 0.0, "ms": {}, "share": {}}
    totals = dict.fromkeys(PARTS, 0.0)
    for call in calls:
        for name, seconds in parts_of(call).items():
            totals[name] += seconds
    waited = sum(call.waited for call in calls) / len(calls)
    means = {name: total / len(calls) for name, total in totals.items()}
    return {
        "calls": len(calls),
        "waited_ms": waited * 1000,
        "ms": {name: mean * 1000 for name, mean in means.items()},
        "share": {name: mean / waited if waited else 0.0 for name, mean in means.items()},
    }


#: The parts of a call that keep its worker busy: the model's phases, the model's time outside
#: them and the pool's handoff (not the queue, which waits for a worker, nor the API process).
BUSY_PARTS = (*PHASES, "worker", "handoff")


def goal_budget(
    split: dict[str, Any], *, workers: int, yardstick: float, goal: float
) -> dict[str, float] | None:
    """What a call may keep a worker busy for the engine to give ``goal`` times ``yardstick``
    clips/s with ``workers`` workers always busy, against what the calls of ``split`` (a
    :func:`phase_split` at ``workers`` calls in flight) took.

    ``allowed_ms`` = workers / (goal · yardstick); ``busy_ms``, the calls' mean of
    :data:`BUSY_PARTS`; ``encode_allowed_ms``, what the encode may take with every other part as
    measured (zero or less: the goal is out of the encoder's reach). None without calls or a
    yardstick."""
    if not split.get("calls") or yardstick <= 0 or workers <= 0 or goal <= 0:
        return None
    ms = split["ms"]
    busy = sum(ms.get(name, 0.0) for name in BUSY_PARTS)
    encode = ms.get("encode", 0.0)
    allowed = workers * 1000 / (goal * yardstick)
    return {
        "goal": goal,
        "concurrency": float(split["concurrency"]),
        "allowed_ms": allowed,
        "busy_ms": busy,
        "encode_ms": encode,
        "decode_ms": ms.get("decode", 0.0),
        "encode_allowed_ms": allowed - (busy - encode),
    }
