"""The gate a call under a grant passes between its check and its run (:class:`CallGate`),
as :meth:`~byoa_skills.skills.engine.SkillEngine.call` drives it. A plain interface: the
wallet shim, above the skills, gives the policy behind it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from byoa_skills.runtimes.text import ChunkHook
from byoa_skills.skills.base import CallResult, PreparedCall
from byoa_skills.skills.terms import GrantTerms

#: ``run(on_chunk)``: the admitted call, run on its skill's runtime.
Run = Callable[[ChunkHook | None], Awaitable[CallResult]]


@dataclass(frozen=True)
class Admitted:
    """A gate's yes to one call: its decision (``allowed`` or ``warn``) and every reason,
    which the call's answer carries."""

    decision: str
    reasons: list[dict[str, Any]]


class CallGate(Protocol):
    """The grant one call runs under, as :meth:`SkillEngine.call` drives it: one gate per
    call. The engine checks the call, applies :attr:`terms` through the skill, asks
    :meth:`admit`, runs the call within ``terms.max_call_seconds`` and always tells
    :meth:`finish` how it ended."""

    @property
    def terms(self) -> GrantTerms:
        """The grant's terms the skill runs the call under."""
        ...

    async def admit(self, call: PreparedCall) -> Admitted | CallResult:
        """Price and decide the call as the grant runs it: :class:`Admitted` when it may run
        (it is then recorded against the grant), else its refusal with the decision and
        reasons."""
        ...

    async def supervise(
        self, call: PreparedCall, run: Run, on_chunk: ChunkHook | None
    ) -> CallResult:
        """Run the admitted call: ``run(on_chunk)`` as it is, or watched beside it (the wallet's
        purpose judge holds a text answer, and its chunks, until it lets them pass). A result
        that carries ``decision`` and ``reasons`` adds them to the gate's."""
        ...

    def finish(self, result: CallResult | None) -> None:
        """The admitted call ended with ``result``; None when it was cut short (it raised
        or was cancelled) and may have cost what was reserved."""
        ...
