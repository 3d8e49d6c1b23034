"""The skill engine: one entry point, :meth:`SkillEngine.call`, takes a skill name, its input
and its params and always returns a :class:`CallResult`. A refusal is data with a stable code,
never an exception, so that the API, the CLI and the activity log see the same code.

Every call takes the same road: the engine's checks and the skill's (``prepare``); under a
grant, the grant's terms and its gate (:class:`~byoa_skills.skills.call_gate.CallGate`);
the run on the skill's runtime; and what was measured of the input, on the answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from byoa_skills.runtimes.text import ChunkHook
from byoa_skills.skills.base import MAX_DEADLINE_SECONDS, CallResult, PreparedCall, Runtimes
from byoa_skills.skills.call_gate import Admitted, CallGate
from byoa_skills.skills.registry import SKILLS

if TYPE_CHECKING:
    from byoa_skills.pool import WorkerPool
    from byoa_skills.runtimes.text import TextRuntime

log = logging.getLogger("byoa_skills.calls")

#: ``on_call(skill, outcome, seconds, audio_seconds)`` is told of every answered call:
#: ``audio_seconds`` is what the skill's :attr:`~byoa_skills.skills.base.Skill.audio_measure`
#: measured of it (0 when it carries no audio).
CallHook = Callable[[str, str, float, float], None]


class SkillEngine:
    """Answers skill calls: checks what every call shares, then hands the call to its skill."""

    def __init__(
        self,
        pool: WorkerPool | None,
        on_call: CallHook | None = None,
        text: TextRuntime | None = None,
    ) -> None:
        """Without a ``pool`` audio calls are unavailable; without ``text``, text calls are."""
        self.runtimes = Runtimes(pool, text)
        self._on_call = on_call

    @property
    def pool(self) -> WorkerPool | None:
        """The Whisper pool, when speech runs here."""
        return self.runtimes.pool

    @property
    def text(self) -> TextRuntime | None:
        """The text sources, when they are set up."""
        return self.runtimes.text

    def wake(self) -> None:
        """Start the speech workers again if they were let go while idle; returns at once."""
        if self.pool is not None:
            self.pool.wake()

    async def warm_up(self, skills: Iterable[str] | None = None) -> None:
        """Return once what ``skills`` run on is warm (every skill's, when None), starting
        the speech workers if they were let go while idle; names it does not know are
        skipped."""
        for name in SKILLS if skills is None else skills:
            if name in SKILLS:
                await SKILLS[name].warm_up(self.runtimes)

    async def fits(self, skill: str, entry: Any) -> bool:
        """Whether the engine can answer ``skill`` now as a manifest's ``skills`` entry asks
        for it (False for a skill it does not know)."""
        handler = SKILLS.get(skill) if isinstance(skill, str) else None
        return handler is not None and await handler.fits(self.runtimes, entry)

    @property
    def ready(self) -> bool:
        """Whether calls can be answered now."""
        return self.pool.ready if self.pool is not None else True

    async def call(
        self,
        skill: Any,
        skill_input: Any,
        params: Any = None,
        deadline: Any = None,
        on_chunk: ChunkHook | None = None,
        gate: CallGate | None = None,
    ) -> CallResult:
        """Answer one call; any bad part of it gives a refusal with its code. A text call
        with ``params.stream`` hands the answer's pieces to ``on_chunk`` as they come.

        With a ``gate`` (a call under a grant) the call is run as the gate's terms say, only
        once the gate admits it, within ``terms.max_call_seconds``, and the gate is told how
        it ended; the answer carries the gate's decision and reasons."""
        began = time.monotonic()
        prepared = self.prepare(skill, skill_input, params, deadline)
        if isinstance(prepared, CallResult):
            result = prepared
        elif gate is None:
            result = with_measurements(await self.run(prepared, on_chunk), prepared)
        else:
            result = await self._call_through(gate, prepared, on_chunk)
        self.report(skill, result, time.monotonic() - began)
        return result

    async def _call_through(
        self, gate: CallGate, prepared: PreparedCall, on_chunk: ChunkHook | None
    ) -> CallResult:
        terms = gate.terms
        prepared = SKILLS[prepared.skill].under_grant(prepared, terms)
        admitted = await gate.admit(prepared)
        if isinstance(admitted, CallResult):
            return with_measurements(admitted, prepared)
        seconds = terms.max_call_seconds
        if prepared.deadline is not None:
            seconds = min(seconds, prepared.deadline)
        bounded = replace(prepared, deadline=seconds)

        async def run(hook: ChunkHook | None) -> CallResult:
            return await self.run(bounded, hook)

        try:
            result = await gate.supervise(bounded, run, on_chunk)
        except BaseException:  # cut short: what it reserved may have been spent
            gate.finish(None)
            raise
        gate.finish(result)
        return with_measurements(_annotated(result, admitted), prepared)

    def prepare(
        self, skill: Any, skill_input: Any, params: Any = None, deadline: Any = None
    ) -> PreparedCall | CallResult:
        """Check a call and measure its input, running nothing; a refusal when it is bad."""
        handler = SKILLS.get(skill) if isinstance(skill, str) else None
        if handler is None:
            return CallResult.refused("unknown-skill", f"no skill named {str(skill)[:60]!r}")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return CallResult.refused("bad-params", "params must be an object")
        if deadline is not None and not _is_deadline(deadline):
            return CallResult.refused(
                "bad-params", f"deadlineSeconds must be a number in (0, {MAX_DEADLINE_SECONDS:g}]"
            )
        prepared = handler.prepare(self.runtimes, skill_input, params, deadline)
        if isinstance(prepared, PreparedCall) and handler.uses_models:
            return replace(prepared, uses_models=True)
        return prepared

    async def run(self, call: PreparedCall, on_chunk: ChunkHook | None = None) -> CallResult:
        """Run a prepared call on its skill's runtime; ``on_chunk`` gets a streamed text
        answer's pieces when the call asked for ``stream``."""
        return await SKILLS[call.skill].run(self.runtimes, call, on_chunk)

    async def price(self, call: PreparedCall) -> tuple[str, Decimal]:
        """The provider kind and the worst-case cost of a prepared call."""
        return await SKILLS[call.skill].price(self.runtimes, call)

    def report(self, skill: Any, result: CallResult, seconds: float) -> None:
        """Log one answered call (never its audio or text) and count it in the metrics."""
        outcome = "ok" if result.ok else str(result.code)
        self.report_outcome(skill, outcome, seconds, result.measured, result.facts)

    def report_outcome(
        self,
        skill: Any,
        outcome: str,
        seconds: float,
        measured: Mapping[str, Any] | None = None,
        facts: Mapping[str, Any] | None = None,
    ) -> None:
        """Log one answered call and count it in the metrics, as :meth:`call` does for its
        own: ``outcome`` is ``ok`` or the refusal's code, ``measured`` what was measured of
        its input in the protocol's names (the skill's audio measure is counted as seconds
        of audio), ``facts`` what the log may add (never audio or text). For a call that
        runs beside :meth:`call`, e.g. a recording on the OpenAI routes."""
        name = skill if isinstance(skill, str) and skill in SKILLS else "unknown"
        measured = dict(measured or {})
        told = " ".join(f"{key}={value}" for key, value in (measured | dict(facts or {})).items())
        log.info("event=call skill=%s outcome=%s ms=%.1f %s", name, outcome, seconds * 1000, told)
        if self._on_call:
            measure = SKILLS[name].audio_measure if name in SKILLS else None
            audio_seconds = measured.get(measure, 0) if measure else 0
            self._on_call(name, outcome, seconds, float(audio_seconds or 0))


def with_measurements(result: CallResult, call: PreparedCall) -> CallResult:
    """``result`` carrying what was measured of the call's input, rounded for the log."""
    shown = {
        key: round(value, 3) if isinstance(value, float) else value
        for key, value in call.measured.items()
    }
    return replace(result, measured=shown)


_SEVERITY = {"allowed": 0, "warn": 1, "ask": 2, "blocked": 3}


def _annotated(result: CallResult, admitted: Admitted) -> CallResult:
    """The gate's decision and reasons on the result, with those the run added (the purpose
    judge's): the stricter decision, every reason."""
    decision = admitted.decision
    if _SEVERITY.get(result.decision or "", -1) > _SEVERITY.get(decision, 0):
        decision = str(result.decision)
    return replace(result, decision=decision, reasons=admitted.reasons + (result.reasons or []))


def _is_deadline(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and 0 < value <= MAX_DEADLINE_SECONDS
    )
