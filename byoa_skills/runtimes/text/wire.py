"""What every source's wire format has in common: the request, the answer, the readers of
streamed bodies (server-sent events, JSON lines) and the mapping of HTTP failures to codes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

import aiohttp

from byoa_skills.runtimes.text.config import TextSource
from byoa_skills.runtimes.text.errors import TextFailure

#: ``on_delta(text, model)``: a piece of the answer, as soon as the source sends it, with the
#: model the source said answered so far (None while it has not said), so that the piece can
#: be held back from an answer of another model.
DeltaHook = Callable[[str, "str | None"], Awaitable[None]]
#: The longest line a streamed body may have (one event of a few tokens is far less).
MAX_LINE_BYTES = 1 << 20


@dataclass(frozen=True)
class ChatRequest:
    """One upstream request: the model's id at its source, the messages, the answer's bound."""

    model: str
    messages: list[dict[str, str]]
    max_tokens: int
    temperature: float | None = None
    stream: bool = False
    #: How many of the likeliest first tokens to ask for, with their log-probabilities
    #: (0: none asked).
    top_logprobs: int = 0


@dataclass
class ChatReply:
    """One answer: its text, why it ended, the tokens counted, and its cost when reported."""

    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: Decimal | None = None
    #: The model the source says answered, when it says.
    model: str | None = None
    #: The likeliest first tokens and their log-probabilities, when asked and given.
    first_tokens: tuple[tuple[str, float], ...] | None = None
    pieces: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ModelInfo:
    """A model a source lists, with its price per token when the source states one."""

    id: str
    prompt_price: Decimal | None = None
    completion_price: Decimal | None = None


class Wire(Protocol):
    """How one kind of source is spoken to."""

    async def list_models(
        self, session: aiohttp.ClientSession, source: TextSource
    ) -> list[ModelInfo]:
        """The models the source offers now."""

    async def chat(
        self,
        session: aiohttp.ClientSession,
        source: TextSource,
        request: ChatRequest,
        on_delta: DeltaHook | None,
    ) -> ChatReply:
        """One answer; each piece goes to ``on_delta`` as it comes when the request streams."""


async def lines(response: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """The body's lines, decoded, without their line ends; a line over
    :data:`MAX_LINE_BYTES` or bytes that are not UTF-8 give ``upstream-malformed``."""
    buffer = b""
    async for piece in response.content.iter_any():
        buffer += piece
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                break
            line, buffer = buffer[:end], buffer[end + 1 :]
            yield _decoded(line.rstrip(b"\r"))
        if len(buffer) > MAX_LINE_BYTES:
            raise TextFailure("upstream-malformed", "a streamed line is too long")
    if buffer:
        yield _decoded(buffer.rstrip(b"\r"))


def _decoded(line: bytes) -> str:
    try:
        return line.decode()
    except UnicodeDecodeError:
        raise TextFailure("upstream-malformed", "the stream is not UTF-8") from None


async def sse_data(response: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """The ``data`` of each server-sent event, as the SSE rules join it: comment lines (``:``)
    and the ``event``, ``id`` and ``retry`` fields are skipped."""
    data: list[str] = []
    async for line in lines(response):
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def json_object(text: str | bytes, what: str) -> dict[str, Any]:
    """``text`` as a JSON object, or ``upstream-malformed`` naming ``what`` it was."""
    try:
        value = json.loads(text)
    except ValueError:
        raise TextFailure("upstream-malformed", f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise TextFailure("upstream-malformed", f"{what} is not a JSON object")
    return value


async def get_json(
    session: aiohttp.ClientSession,
    url: str,
    source: TextSource,
    what: str,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``GET url`` as a JSON object; an HTTP error as :func:`refusal_of` says."""
    async with session.get(url, headers=headers or {}) as response:
        if response.status != 200:
            raise await refusal_of(response, source)
        return json_object(await response.read(), what)


async def refusal_of(response: aiohttp.ClientResponse, source: TextSource) -> TextFailure:
    """The failure an HTTP error status means: ``unknown-model`` for a 404 about the model,
    ``upstream-refused`` for another 4xx, ``upstream-failed`` for the rest."""
    detail = await _error_detail(response)
    status = response.status
    if status == 404 and "model" in detail.lower():
        return TextFailure("unknown-model", f"{source.name}: {detail}")
    code = "upstream-refused" if 400 <= status < 500 else "upstream-failed"
    return TextFailure(code, f"{source.name} answered HTTP {status}: {detail}")


async def _error_detail(response: aiohttp.ClientResponse) -> str:
    """The error's message, from the shapes sources use (``{"error": {"message"}}``,
    ``{"error": "..."}``, ``{"message"}``), cut short; the status text otherwise."""
    try:
        body = json.loads(await response.content.read(64 * 1024))
    except (ValueError, aiohttp.ClientError):
        return str(response.reason or "")[:200]
    return error_message(body)[:200] or str(response.reason or "")[:200]


def error_message(body: Any) -> str:
    """The message of an error object in any of the usual shapes, or ''."""
    if not isinstance(body, dict):
        return ""
    error = body.get("error", body)
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        message = error.get("message")
        return message if isinstance(message, str) else json.dumps(error)[:200]
    return ""


def token_count(value: Any) -> int | None:
    """A token count a source reported, when it is a whole number."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
