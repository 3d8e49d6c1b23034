"""What every skill shares: the call as checked (:class:`PreparedCall`), its answer
(:class:`CallResult`), the runtimes a skill runs on, and :class:`Skill`, what a skill declares
once: its input check, what the gate measures, its pricing, what it runs on (to warm it, and
to say whether a site's manifest can be served). The HTTP status of its codes is in the one
table, :data:`byoa_skills.protocol.codes.HTTP_STATUS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from byoa_skills.runtimes.text import ChunkHook
from byoa_skills.skills.terms import GrantTerms
from byoa_skills.wav import Clip

if TYPE_CHECKING:
    from byoa_skills.pool import WorkerPool
    from byoa_skills.runtimes.text import TextRuntime

#: A call may ask for a deadline of at most this many seconds (the wallet's own limit).
MAX_DEADLINE_SECONDS = 120.0
#: What a local model costs a site: nothing, said the way receipts say it.
LOCAL_RECEIPT = {"cost": "0.000 USD", "provider": "local"}


@dataclass(frozen=True)
class CallResult:
    """The answer to one call: ``ok`` with an ``output``, or a refusal ``code``."""

    ok: bool
    output: dict[str, Any] | None = None
    receipt: dict[str, str] | None = None
    code: str | None = None
    message: str | None = None
    #: Facts of the run for logs and the ``Server-Timing`` header (never audio or text).
    facts: dict[str, float | str] = field(default_factory=dict)
    #: Under a grant: the gate's decision and reasons.
    decision: str | None = None
    reasons: list[dict[str, Any]] | None = None
    #: What the engine measured of the input, as the protocol names it (``clipSeconds``,
    #: ``textChars``), rounded for the log.
    measured: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def refused(cls, code: str, message: str) -> CallResult:
        """A refusal with its code and one-line message."""
        return cls(ok=False, code=code, message=message)

    def to_json(self, with_code: bool = True) -> dict[str, Any]:
        """The result as the wire carries it; ``with_code`` only for a trusted local caller."""
        if self.ok:
            return {"ok": True, "output": self.output, "receipt": self.receipt}
        body: dict[str, Any] = {"ok": False}
        if with_code:
            body.update(code=self.code, message=self.message)
            if self.reasons is not None:
                body.update(decision=self.decision, reasons=self.reasons)
        return body


@dataclass(frozen=True)
class PreparedCall:
    """A call whose input and params passed their checks, with what the engine measured of
    it (``measured``, in the protocol's names) and the parsed input its skill runs on."""

    skill: str
    params: dict[str, Any]
    deadline: float | None = None
    #: What the gate measures, e.g. ``{"clipSeconds": 3.2}`` or ``{"textChars": 120}``.
    measured: Mapping[str, float] = field(default_factory=dict)
    #: The parsed clip of an audio call.
    clip: Clip | None = None
    #: The messages of a text call, as checked.
    messages: list[dict[str, str]] | None = None
    #: The model that must answer a text call (``SOURCE/MODEL``), once a grant's code is
    #: resolved; without it, ``params.model`` or the default model.
    model: str | None = None
    #: Whether a grant's ``models`` block applies to this call (its skill's
    #: :attr:`Skill.uses_models`), so that the gate needs no registry.
    uses_models: bool = False


@dataclass(frozen=True)
class Runtimes:
    """What skills run on: the Whisper pool and the text sources (None: not set up here)."""

    pool: WorkerPool | None = None
    text: TextRuntime | None = None


class Skill(ABC):
    """One skill, declared once. The engine checks what every call shares (the skill's name,
    params being an object, the deadline); the skill checks the rest and runs the call."""

    #: The skill's name on the wire, e.g. ``audio.transcribe``.
    name: ClassVar[str]
    #: Whether the grant's ``models`` block applies to this skill's calls (its manifest entry
    #: may carry one, ``docs/models-block.md``).
    uses_models: ClassVar[bool] = False
    #: Whether its calls under a grant run beside the purpose judge (``docs/judge.md``) when the
    #: visitor turned the judge on for the site.
    judged: ClassVar[bool] = False
    #: The measurement (a key of :attr:`PreparedCall.measured`) that says how many seconds
    #: of audio a call carried, counted in the metrics; None when its calls carry none.
    audio_measure: ClassVar[str | None] = None

    @abstractmethod
    def prepare(
        self, runtimes: Runtimes, skill_input: Any, params: dict[str, Any], deadline: float | None
    ) -> PreparedCall | CallResult:
        """Check the input and params and measure the input; a refusal when they are bad."""

    @abstractmethod
    async def run(
        self, runtimes: Runtimes, call: PreparedCall, on_chunk: ChunkHook | None
    ) -> CallResult:
        """Answer a prepared call; a refusal with its code when the runtime cannot."""

    async def price(self, runtimes: Runtimes, call: PreparedCall) -> tuple[str, Decimal]:
        """The provider kind and the worst-case cost of a prepared call (default: a local
        model, for nothing)."""
        return "local-model", Decimal(0)

    def under_grant(self, call: PreparedCall, terms: GrantTerms) -> PreparedCall:
        """The call as a grant with these terms runs it (default: unchanged)."""
        return call

    async def fits(self, runtimes: Runtimes, entry: Any) -> bool:
        """Whether this engine can answer the skill now as a manifest's ``skills`` entry
        (``entry``) asks for it (default: yes)."""
        return True

    async def warm_up(self, runtimes: Runtimes) -> None:
        """Return once what the skill runs on is warm, so that a site's first call is as fast
        as the next (default: nothing to warm)."""
        return None
