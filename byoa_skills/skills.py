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
from decimal import Decimal
from typing import Any

from byoa_skills.models import ModelError, require_language
from byoa_skills.pool import CallFailure, WorkerPool
from byoa_skills.runtimes.text import ChunkHook, TextCall, TextFailure, TextRuntime
from byoa_skills.wav import MAX_CLIP_SECONDS, Clip, WavError, clip_from_skill_input

log = logging.getLogger("byoa_skills.calls")

AUDIO_TRANSCRIBE = "audio.transcribe"
TEXT_GENERATE = "text.generate"
#: The skills the wallet 0.1 knows.
KNOWN_SKILLS = (AUDIO_TRANSCRIBE, TEXT_GENERATE)
#: A call may ask for a deadline of at most this many seconds (the wallet's own limit).
MAX_DEADLINE_SECONDS = 120.0
#: What a local model costs a site: nothing, said the way receipts say it.
LOCAL_RECEIPT = {"cost": "0.000 USD", "provider": "local"}
#: The most text a ``text.generate`` call may carry, in code points (a grant may say less).
MAX_TEXT_CHARS = 100_000
#: The longest answer a call may ask for, in tokens (a grant may say less).
MAX_ANSWER_TOKENS = 8192
#: The answer's length when neither the call nor the grant bounds it, in tokens.
DEFAULT_ANSWER_TOKENS = 512
#: The most alternative answers one call may ask for.
MAX_CHOICES = 4

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


def chunk_frame(call_id: Any, choice: int, text: str) -> dict[str, Any]:
    """The frame that carries one piece of a streamed answer before its ``result``;
    ``choice`` is named only for the alternatives after the first."""
    frame: dict[str, Any] = {"type": "chunk", "id": call_id, "text": text}
    if choice:
        frame["choice"] = choice
    return frame


@dataclass(frozen=True)
class PreparedCall:
    """A call whose input and params passed their checks, with what the engine measured of
    it: the parsed clip, or the length of the text in Unicode code points."""

    skill: str
    params: dict[str, Any]
    deadline: float | None = None
    clip: Clip | None = None
    text_chars: int | None = None
    #: The messages of a text call, as checked.
    messages: list[dict[str, str]] | None = None
    #: The model that must answer a text call (``SOURCE/MODEL``), once a grant's code is
    #: resolved; without it, ``params.model`` or the default model.
    model: str | None = None

    @property
    def clip_seconds(self) -> float | None:
        """The clip's duration measured from the WAV itself, for audio skills."""
        return None if self.clip is None else self.clip.seconds


class SkillEngine:
    """Answers skill calls: checks input and params, then runs the skill on the pool."""

    def __init__(
        self,
        pool: WorkerPool | None,
        on_call: Callable[[str, str, float, float], None] | None = None,
        text: TextRuntime | None = None,
    ) -> None:
        """``on_call(skill, outcome, seconds, audio_seconds)`` is told of every answer. Without
        a ``pool`` audio calls are unavailable; without ``text``, text calls are."""
        self.pool = pool
        self.text = text
        self._on_call = on_call

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
    ) -> CallResult:
        """Answer one call; any bad part of it gives a refusal with its code. A text call
        with ``params.stream`` hands the answer's pieces to ``on_chunk`` as they come."""
        began = time.monotonic()
        prepared = self.prepare(skill, skill_input, params, deadline)
        result = (
            prepared if isinstance(prepared, CallResult) else await self.run(prepared, on_chunk)
        )
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
            try:
                messages = checked_messages(skill_input)
                check_text_params(params)
            except TextFailure as refusal:
                return CallResult.refused(refusal.code, refusal.message)
            chars = sum(len(message["content"]) for message in messages)
            if chars > MAX_TEXT_CHARS:
                return CallResult.refused(
                    "text-too-long", f"{chars} characters; the engine takes {MAX_TEXT_CHARS}"
                )
            return PreparedCall(skill, params, deadline, text_chars=chars, messages=messages)
        language = params.get("language")
        if language is not None and not (
            isinstance(language, str) and _LANGUAGE.fullmatch(language)
        ):
            return CallResult.refused("bad-params", "language must be a code such as 'en' or 'ru'")
        try:
            if language is not None and self.pool is not None:
                require_language(self.pool.config.model_name, language)
            clip = clip_from_skill_input(skill_input, max_seconds=MAX_CLIP_SECONDS)
        except (WavError, ModelError) as refusal:
            return CallResult.refused(refusal.code, refusal.message)
        return PreparedCall(skill, params, deadline, clip=clip)

    async def run(self, call: PreparedCall, on_chunk: ChunkHook | None = None) -> CallResult:
        """Run a prepared call on its skill's runtime; ``on_chunk`` gets a streamed text
        answer's pieces when the call asked for ``stream``."""
        if call.skill == TEXT_GENERATE:
            return await self._generate(call, on_chunk if call.params.get("stream") else None)
        if call.clip is None or self.pool is None:
            return CallResult.refused("skill-unavailable", "no speech model runs here")
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

    async def _generate(self, call: PreparedCall, on_chunk: ChunkHook | None) -> CallResult:
        if self.text is None or call.messages is None:
            return CallResult.refused("skill-unavailable", "no text sources are set up")
        request = _text_call(call)
        facts: dict[str, float | str] = {"text_chars": call.text_chars or 0}
        try:
            answer = await self.text.generate(request, on_chunk)
        except TextFailure as failure:
            return CallResult(ok=False, code=failure.code, message=failure.message, facts=facts)
        output: dict[str, Any] = {"text": answer.texts[0]}
        if request.choices > 1:
            output["choices"] = answer.texts
        facts.update(model=answer.model, tokens=answer.completion_tokens)
        if answer.first_piece_seconds is not None:
            facts["first_ms"] = round(answer.first_piece_seconds * 1000, 1)
        cost = format(answer.cost, "f") if answer.cost else "0.000"
        receipt = {"cost": f"{cost} USD", "provider": answer.provider}
        return CallResult(ok=True, output=output, receipt=receipt, facts=facts)

    async def price(self, call: PreparedCall) -> tuple[str, Decimal]:
        """The provider kind and the worst-case cost of a prepared call: a local Whisper
        call costs nothing; a text call costs what its source's listed prices say."""
        if call.skill != TEXT_GENERATE or self.text is None:
            return "local-model", Decimal(0)
        request = _text_call(call)
        return await self.text.estimate(
            request.model, call.text_chars or 0, request.max_tokens, request.choices
        )

    def report(self, skill: Any, result: CallResult, seconds: float) -> None:
        """Log one answered call (never its audio or text) and count it in the metrics."""
        name = skill if skill in KNOWN_SKILLS else "unknown"
        outcome = "ok" if result.ok else str(result.code)
        facts = " ".join(f"{key}={value}" for key, value in result.facts.items())
        log.info("event=call skill=%s outcome=%s ms=%.1f %s", name, outcome, seconds * 1000, facts)
        if self._on_call:
            self._on_call(name, outcome, seconds, float(result.facts.get("clip_s", 0.0)))


def _text_call(call: PreparedCall) -> TextCall:
    """What a prepared text call asks of the text runtime, with the defaults filled in."""
    return TextCall(
        model=call.model or call.params.get("model"),
        messages=call.messages or [],
        max_tokens=call.params.get("maxTokens", DEFAULT_ANSWER_TOKENS),
        choices=call.params.get("choices", 1),
        temperature=call.params.get("temperature"),
        deadline=call.deadline or MAX_DEADLINE_SECONDS,
    )


def checked_messages(skill_input: Any) -> list[dict[str, str]]:
    """``input.messages`` as plain ``{role, content}`` pairs, or :class:`TextFailure`:
    ``bad-messages`` when it is not a non-empty list of objects with a string content,
    ``unknown-role`` for a role other than system, user and assistant."""
    messages = skill_input.get("messages") if isinstance(skill_input, dict) else None
    if not isinstance(messages, list) or not messages:
        raise TextFailure("bad-messages", "input.messages must be a non-empty list")
    checked = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise TextFailure("bad-messages", f"message {index} needs a string content")
        role = message.get("role")
        if role not in _ROLES:
            raise TextFailure(
                "unknown-role", f"message {index}: role must be system, user or assistant"
            )
        checked.append({"role": role, "content": message["content"]})
    return checked


def check_text_params(params: dict[str, Any]) -> None:
    """Refuse text params of the wrong type or out of range (:class:`TextFailure`)."""
    tokens = params.get("maxTokens")
    if tokens is not None:
        if not _is_count(tokens):
            raise TextFailure("bad-params", "maxTokens must be a whole number from 1")
        if tokens > MAX_ANSWER_TOKENS:
            raise TextFailure(
                "max-tokens-over-limit", f"maxTokens is {tokens}; the most is {MAX_ANSWER_TOKENS}"
            )
    choices = params.get("choices")
    if choices is not None and not (_is_count(choices) and choices <= MAX_CHOICES):
        raise TextFailure("bad-params", f"choices must be a whole number from 1 to {MAX_CHOICES}")
    model = params.get("model")
    if model is not None and not (isinstance(model, str) and 0 < len(model) <= 200):
        raise TextFailure("bad-params", "model must be a model code such as 'm1'")
    stream = params.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise TextFailure("bad-params", "stream must be true or false")
    temperature = params.get("temperature")
    if temperature is not None and not (
        isinstance(temperature, (int, float))
        and not isinstance(temperature, bool)
        and 0 <= temperature <= 2
    ):
        raise TextFailure("bad-params", "temperature must be a number from 0 to 2")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _is_deadline(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and 0 < value <= MAX_DEADLINE_SECONDS
    )
