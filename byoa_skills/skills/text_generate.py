"""``text.generate``: chat messages (+ ``maxTokens``, ``choices``, ``model``, ``stream``,
``temperature``) → ``{text}``, answered by one of the visitor's text sources. The gate
measures the messages' length in Unicode code points (``textChars``)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from decimal import Decimal
from typing import Any, ClassVar

from byoa_skills.runtimes.text import ChunkHook, TextCall, TextFailure
from byoa_skills.skills.base import MAX_DEADLINE_SECONDS, CallResult, PreparedCall, Runtimes, Skill
from byoa_skills.skills.terms import GrantTerms

#: The most text a ``text.generate`` call may carry, in code points (a grant may say less).
MAX_TEXT_CHARS = 100_000
#: The longest answer a call may ask for, in tokens (a grant may say less).
MAX_ANSWER_TOKENS = 8192
#: The answer's length when neither the call nor the grant bounds it, in tokens.
DEFAULT_ANSWER_TOKENS = 512
#: The most alternative answers one call may ask for.
MAX_CHOICES = 4
#: How long the text sources are given to list their models when a manifest is fitted, in
#: seconds, all together.
SOURCE_CHECK_SECONDS = 5.0

_ROLES = ("system", "user", "assistant")


class TextGenerate(Skill):
    """Text answers from the visitor's own text source, streamed when asked."""

    name: ClassVar[str] = "text.generate"
    uses_models: ClassVar[bool] = True
    judged: ClassVar[bool] = True

    def prepare(
        self, runtimes: Runtimes, skill_input: Any, params: dict[str, Any], deadline: float | None
    ) -> PreparedCall | CallResult:
        """Refuse bad messages or params and text over :data:`MAX_TEXT_CHARS`; measure
        ``textChars``."""
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
        return PreparedCall(
            self.name, params, deadline, measured={"textChars": chars}, messages=messages
        )

    async def run(
        self, runtimes: Runtimes, call: PreparedCall, on_chunk: ChunkHook | None
    ) -> CallResult:
        """Ask the source; a streamed answer's pieces go to ``on_chunk`` when the call asked
        for ``stream``."""
        if runtimes.text is None or call.messages is None:
            return CallResult.refused("skill-unavailable", "no text sources are set up")
        request = text_call(call)
        try:
            answer = await runtimes.text.generate(
                request, on_chunk if call.params.get("stream") else None
            )
        except TextFailure as failure:
            return CallResult.refused(failure.code, failure.message)
        output: dict[str, Any] = {"text": answer.texts[0]}
        if request.choices > 1:
            output["choices"] = answer.texts
        facts: dict[str, float | str] = {"model": answer.model, "tokens": answer.completion_tokens}
        if answer.first_piece_seconds is not None:
            facts["first_ms"] = round(answer.first_piece_seconds * 1000, 1)
        cost = format(answer.cost, "f") if answer.cost else "0.000"
        receipt = {"cost": f"{cost} USD", "provider": answer.provider}
        return CallResult(ok=True, output=output, receipt=receipt, facts=facts)

    async def price(self, runtimes: Runtimes, call: PreparedCall) -> tuple[str, Decimal]:
        """What the source's listed prices say for the worst case (0 for a local source)."""
        if runtimes.text is None:
            return "local-model", Decimal(0)
        request = text_call(call)
        return await runtimes.text.estimate(
            request.model,
            int(call.measured.get("textChars", 0)),
            request.max_tokens,
            request.choices,
        )

    def under_grant(self, call: PreparedCall, terms: GrantTerms) -> PreparedCall:
        """The model the grant's code names (a code the grant lacks is left for the gate to
        refuse), and the grant's ``maxAnswerTokens`` as the bound when the call states none."""
        model = terms.models.get(call.params.get("model"))  # type: ignore[arg-type]
        params = call.params
        ceiling = terms.max_answer_tokens
        if ceiling is not None and params.get("maxTokens") is None:
            params = {**params, "maxTokens": ceiling}
        return replace(call, model=model, params=params)

    async def fits(self, runtimes: Runtimes, entry: Any) -> bool:
        """Whether some text source answers, within :data:`SOURCE_CHECK_SECONDS`, with at
        least one model."""
        text = runtimes.text
        if text is None:
            return False
        try:
            sources = list(text.config().sources.values())
        except TextFailure:
            return False

        async def offers(source: Any) -> bool:
            try:
                return bool(await text.list_models(source))
            except TextFailure:
                return False

        try:
            answers = await asyncio.wait_for(
                asyncio.gather(*(offers(source) for source in sources)), SOURCE_CHECK_SECONDS
            )
        except asyncio.TimeoutError:
            return False
        return any(answers)


def text_call(call: PreparedCall) -> TextCall:
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
