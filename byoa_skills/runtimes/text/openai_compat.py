"""The OpenAI-compatible chat completions wire (LM Studio, llama.cpp's server, vLLM,
LocalAI): ``GET /models``, ``POST /chat/completions``, streamed as server-sent events ending
with ``data: [DONE]``."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

import aiohttp

from byoa_skills.runtimes.text.config import TextSource
from byoa_skills.runtimes.text.errors import TextFailure
from byoa_skills.runtimes.text.wire import (
    ChatReply,
    ChatRequest,
    DeltaHook,
    ModelInfo,
    error_message,
    get_json,
    json_object,
    refusal_of,
    sse_data,
    token_count,
)


class OpenAICompatibleWire:
    """Speaks the OpenAI chat completions format; a subclass adds a service's own fields."""

    def headers(self, source: TextSource) -> dict[str, str]:
        """The headers of every request: the key as a bearer token, when there is one."""
        key = source.api_key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body of a chat request."""
        body: dict[str, Any] = {
            "model": request.model,
            "messages": request.messages,
            "max_tokens": request.max_tokens,
            "stream": request.stream,
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = request.top_logprobs
        return body

    async def list_models(
        self, session: aiohttp.ClientSession, source: TextSource
    ) -> list[ModelInfo]:
        """The ids of ``GET {url}/models``, with prices where the entries state them."""
        body = await get_json(
            session, f"{source.url}/models", source, "the model list", self.headers(source)
        )
        entries = body.get("data")
        if not isinstance(entries, list):
            raise TextFailure("upstream-malformed", "the model list has no data array")
        return [
            ModelInfo(entry["id"], *_prices(entry.get("pricing")))
            for entry in entries
            if isinstance(entry, dict) and isinstance(entry.get("id"), str)
        ]

    async def chat(
        self,
        session: aiohttp.ClientSession,
        source: TextSource,
        request: ChatRequest,
        on_delta: DeltaHook | None,
    ) -> ChatReply:
        """One chat completion, streamed or whole."""
        async with session.post(
            f"{source.url}/chat/completions", json=self.body(request), headers=self.headers(source)
        ) as response:
            if response.status != 200:
                raise await refusal_of(response, source)
            if not request.stream:
                return self.whole_reply(json_object(await response.read(), "the answer"))
            reply = ChatReply()
            done = False
            async for data in sse_data(response):
                if data == "[DONE]":
                    done = True
                    break
                await self.take_chunk(reply, json_object(data, "a streamed event"), on_delta)
            if not done and reply.finish_reason is None:
                raise TextFailure("upstream-malformed", "the stream ended before its end")
            reply.text = "".join(reply.pieces)
            return reply

    def whole_reply(self, body: dict[str, Any]) -> ChatReply:
        """The answer of a request that did not stream."""
        self.raise_error_event(body)
        choice = _first_choice(body)
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise TextFailure("upstream-malformed", "the answer has no message content")
        reply = ChatReply(
            text=content,
            finish_reason=_text_or_none(choice.get("finish_reason")),
            model=_text_or_none(body.get("model")),
            first_tokens=first_tokens(choice.get("logprobs")),
        )
        self.take_usage(reply, body.get("usage"))
        return reply

    async def take_chunk(
        self, reply: ChatReply, chunk: dict[str, Any], on_delta: DeltaHook | None
    ) -> None:
        """Add one streamed chunk to the reply; its text goes to ``on_delta``."""
        self.raise_error_event(chunk)
        if reply.model is None:
            reply.model = _text_or_none(chunk.get("model"))
        self.take_usage(reply, chunk.get("usage"))
        choices = chunk.get("choices")
        if choices == []:  # the usage chunk at the end
            return
        choice = _first_choice(chunk)
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            raise TextFailure("upstream-malformed", "a streamed chunk has no delta")
        content = delta.get("content")
        if content is not None and not isinstance(content, str):
            raise TextFailure("upstream-malformed", "a delta's content is not text")
        if content:
            reply.pieces.append(content)
            if on_delta is not None:
                await on_delta(content, reply.model)
        finish = choice.get("finish_reason")
        if finish is not None:
            reply.finish_reason = str(finish)

    def take_usage(self, reply: ChatReply, usage: Any) -> None:
        """Read the token counts of a ``usage`` object."""
        if isinstance(usage, dict):
            reply.prompt_tokens = token_count(usage.get("prompt_tokens"))
            reply.completion_tokens = token_count(usage.get("completion_tokens"))

    def raise_error_event(self, body: dict[str, Any]) -> None:
        """An error object in a 200 answer or a stream means the source failed mid-way."""
        if "error" in body and body["error"] is not None:
            raise TextFailure("upstream-error", error_message(body)[:200] or "an error event")
        if body.get("object") == "error":  # vLLM's shape
            raise TextFailure("upstream-error", str(body.get("message", ""))[:200])


def _first_choice(body: dict[str, Any]) -> dict[str, Any]:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise TextFailure("upstream-malformed", "the answer has no choices")
    return choices[0]


def first_tokens(logprobs: Any) -> tuple[tuple[str, float], ...] | None:
    """The first answer token's alternatives, ``(token, log-probability)``, from a choice's
    ``logprobs`` object (``content[0].top_logprobs``); None when it holds none. An entry that
    is not a token and a finite log-probability of at most 0 is left out."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    first = content[0] if isinstance(content, list) and content else None
    top = first.get("top_logprobs") if isinstance(first, dict) else None
    if not isinstance(top, list):
        return None
    found = []
    for entry in top:
        token = entry.get("token") if isinstance(entry, dict) else None
        logprob = entry.get("logprob") if isinstance(entry, dict) else None
        if isinstance(token, str) and isinstance(logprob, int | float) and -1e9 < logprob <= 0:
            found.append((token, float(logprob)))
    return tuple(found) or None


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _prices(pricing: Any) -> tuple[Decimal | None, Decimal | None]:
    """(prompt, completion) price per token, from OpenRouter-style ``pricing`` strings."""
    if not isinstance(pricing, dict):
        return None, None
    return _money(pricing.get("prompt")), _money(pricing.get("completion"))


def _money(value: Any) -> Decimal | None:
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return amount if amount.is_finite() and amount >= 0 else None
