"""The skill contracts: what a call asks, what it gets back, and how each skill is answered.

One entry point, :meth:`SkillEngine.call`, takes a skill name, its input and its params and
always returns a :class:`CallResult`: a refusal is data with a stable code, never an
exception, so that the API, the CLI and the activity log see the same code.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from byoa_skills.models import ModelError, require_language
from byoa_skills.pool import CallFailure, WorkerPool
from byoa_skills.wav import MAX_CLIP_SECONDS, Clip, WavError, clip_from_skill_input

log = logging.getLogger("byoa_skills.calls")

AUDIO_TRANSCRIBE = "audio.transcribe"
TEXT_GENERATE = "text.generate"
#: The skills the wallet 0.1 knows. ``text.generate`` is refused as unavailable here.
KNOWN_SKILLS = (AUDIO_TRANSCRIBE, TEXT_GENERATE)
#: A call may ask for a deadline of at most this many seconds (the wallet's own limit).
MAX_DEADLINE_SECONDS = 120.0
#: What a local model costs a site: nothing, said the way receipts say it.
LOCAL_RECEIPT = {"cost": "0.000 USD", "provider": "local"}

_LANGUAGE = re.compile(r"[a-z]{2,3}")
_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class CallResult:
    """The answer to one call: ``ok`` with an ``output``, or a refusal ``code``."""

    ok: bool
    output: dict[str, Any] | None = None
    receipt: dict[str, str] | None = None
    code: str | None = None
    message: str | None = None
    #: Measured facts for logs and metrics (never audio or text).
    facts: dict[str, float | str] = field(default_factory=dict)
    #: Under a grant: the gate's decision and reasons, and what the shim measured.
    decision: str | None = None
    reasons: list[dict[str, Any]] | None = None
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
    it: the parsed clip, or the length of the text in Unicode code points."""

    skill: str
    params: dict[str, Any]
    deadline: float | None = None
    clip: Clip | None = None
    text_chars: int | None = None

    @property
    def clip_seconds(self) -> float | None:
        """The clip's duration measured from the WAV itself, for audio skills."""
        return None if self.clip is None else self.clip.seconds


class SkillEngine:
    """Answers skill calls: checks input and params, then runs the skill on the pool."""

    def __init__(
        self, pool: WorkerPool, on_call: Callable[[str, str, float, float], None] | None = None
    ) -> None:
        """``on_call(skill, outcome, seconds, audio_seconds)`` is told of every answer."""
        self.pool = pool
        self._on_call = on_call

    @property
    def ready(self) -> bool:
        """Whether calls can be answered now."""
        return self.pool.ready

    async def call(
        self, skill: Any, skill_input: Any, params: Any = None, deadline: Any = None
    ) -> CallResult:
        """Answer one call; any bad part of it gives a refusal with its code."""
        began = time.monotonic()
        prepared = self.prepare(skill, skill_input, params, deadline)
        result = prepared if isinstance(prepared, CallResult) else await self.run(prepared)
        self.report(skill, result, time.monotonic() - began)
        return result

    def prepare(
        self, skill: Any, skill_input: Any, params: Any = None, deadline: Any = None
    ) -> PreparedCall | CallResult:
        """Check a call and measure its input, running nothing; a refusal when it is bad."""
        if skill not in KNOWN_SKILLS:
            return CallResult.refused("unknown-skill", f"no skill named {str(skill)[:60]!r}")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return CallResult.refused("bad-params", "params must be an object")
        if deadline is not None and not _is_deadline(deadline):
            return CallResult.refused(
                "bad-params", f"deadlineSeconds must be a number in (0, {MAX_DEADLINE_SECONDS:g}]"
            )
        if skill == TEXT_GENERATE:
            chars = text_chars(skill_input)
            if chars is None:
                return CallResult.refused(
                    "bad-input", "input.messages must be a non-empty list of {role, content}"
                )
            return PreparedCall(skill, params, deadline, text_chars=chars)
        language = params.get("language")
        if language is not None and not (
            isinstance(language, str) and _LANGUAGE.fullmatch(language)
        ):
            return CallResult.refused("bad-params", "language must be a code such as 'en' or 'ru'")
        try:
            if language is not None:
                require_language(self.pool.config.model_name, language)
            clip = clip_from_skill_input(skill_input, max_seconds=MAX_CLIP_SECONDS)
        except (WavError, ModelError) as refusal:
            return CallResult.refused(refusal.code, refusal.message)
        return PreparedCall(skill, params, deadline, clip=clip)

    async def run(self, call: PreparedCall) -> CallResult:
        """Run a prepared call on its skill's runtime."""
        if call.skill == TEXT_GENERATE or call.clip is None:
            return CallResult.refused("skill-unavailable", "no text source is set up")
        clip = call.clip
        try:
            answer = await self.pool.transcribe(clip, call.params.get("language"), call.deadline)
        except CallFailure as failure:
            return CallResult(
                ok=False, code=failure.code, message=failure.message,
                facts={"clip_s": round(clip.seconds, 3)},
            )  # fmt: skip
        return CallResult(
            ok=True,
            output={"text": answer.text},
            receipt=dict(LOCAL_RECEIPT),
            facts={
                "clip_s": round(clip.seconds, 3),
                "queued_ms": round(answer.queued_seconds * 1000, 1),
                "infer_ms": round(answer.inference_seconds * 1000, 1),
                "language": answer.language,
                "worker": answer.worker_pid,
            },
        )

    def report(self, skill: Any, result: CallResult, seconds: float) -> None:
        """Log one answered call (never its audio or text) and count it in the metrics."""
        name = skill if skill in KNOWN_SKILLS else "unknown"
        outcome = "ok" if result.ok else str(result.code)
        facts = " ".join(f"{key}={value}" for key, value in result.facts.items())
        log.info("event=call skill=%s outcome=%s ms=%.1f %s", name, outcome, seconds * 1000, facts)
        if self._on_call:
            self._on_call(name, outcome, seconds, float(result.facts.get("clip_s", 0.0)))


def text_chars(skill_input: Any) -> int | None:
    """The length in Unicode code points of all the messages' contents, or None when
    ``input.messages`` is not a non-empty list of ``{role, content}`` with a known role."""
    messages = skill_input.get("messages") if isinstance(skill_input, dict) else None
    if not isinstance(messages, list) or not messages:
        return None
    total = 0
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            return None
        content = message.get("content")
        if not isinstance(content, str):
            return None
        total += len(content)
    return total


def _is_deadline(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and 0 < value <= MAX_DEADLINE_SECONDS
    )
