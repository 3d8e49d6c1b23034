"""The text runtime: answers a ``text.generate`` call with the model it names, at that
model's source, within the call's deadline and the source's bound on concurrent requests.

One aiohttp client session serves every source. The model is looked up in the source's own
list first (kept for :data:`MODEL_LIST_SECONDS`), and the answer must come from that model:
a source that says another model answered gives ``model-mismatch``, never its text (nor, for
a streamed answer, any piece of it: the model is checked before the first piece goes out).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal

import aiohttp

from byoa_skills.runtimes.text.config import (
    SourceConfig,
    SourceConfigError,
    SourceStore,
    TextSource,
)
from byoa_skills.runtimes.text.errors import TextFailure
from byoa_skills.runtimes.text.ollama import OllamaWire, canonical_model
from byoa_skills.runtimes.text.openai_compat import OpenAICompatibleWire
from byoa_skills.runtimes.text.openrouter import OpenRouterWire
from byoa_skills.runtimes.text.wire import ChatReply, ChatRequest, ModelInfo, Wire

#: How long a source's model list is trusted before it is asked again.
MODEL_LIST_SECONDS = 30.0
#: Seconds to open a connection to a source; a source that takes longer is down.
CONNECT_SECONDS = 3.0
#: ``on_chunk(choice, text)``: a piece of alternative ``choice``'s answer, as it comes.
ChunkHook = Callable[[int, str], Awaitable[None]]

_WIRES: dict[str, Wire] = {
    "openai": OpenAICompatibleWire(),
    "ollama": OllamaWire(),
    "openrouter": OpenRouterWire(),
}


@dataclass(frozen=True)
class TextAnswer:
    """The answer to one call: one text per alternative asked for, what it cost, who
    answered, and the counts for the receipt and the log."""

    texts: list[str]
    cost: Decimal
    provider: str
    model: str
    completion_tokens: int
    finish_reasons: list[str | None]
    first_piece_seconds: float | None
    #: The first answer's likeliest first tokens with their log-probabilities, when the call
    #: asked for them (``TextCall.top_logprobs``) and the source gave them.
    first_tokens: tuple[tuple[str, float], ...] | None = None


@dataclass(frozen=True)
class TextCall:
    """What a call asks of the runtime, already checked by the skill's contract."""

    model: str
    messages: list[dict[str, str]]
    max_tokens: int
    choices: int = 1
    temperature: float | None = None
    deadline: float = 120.0
    #: How many likeliest first tokens to ask the source for, with their log-probabilities
    #: (0: none; a source that does not give them answers as if not asked).
    top_logprobs: int = 0


class TextRuntime:
    """The visitor's text sources, behind one ``generate``."""

    def __init__(self, store: SourceStore | None = None) -> None:
        self.store = store or SourceStore()
        self._session: aiohttp.ClientSession | None = None
        self._bounds: dict[tuple[str, int], asyncio.Semaphore] = {}
        self._models: dict[TextSource, tuple[float, list[ModelInfo]]] = {}
        self._running: dict[str, int] = {}

    def config(self) -> SourceConfig:
        """The sources now; ``unknown-source`` when the sources file is damaged."""
        try:
            return self.store.load()
        except SourceConfigError as error:
            raise TextFailure("unknown-source", str(error)[:200]) from None

    def resolve(self, model: str | None) -> tuple[TextSource, str]:
        """The source and the model id that ``SOURCE/MODEL`` (or the default model) names."""
        config = self.config()
        name = model or config.default_model
        if not name:
            raise TextFailure("model-required", "name a model as params.model (SOURCE/MODEL)")
        source_name, _, model_id = name.partition("/")
        source = config.sources.get(source_name)
        if source is None or not model_id:
            raise TextFailure("unknown-source", f"no source named {source_name[:40]!r}")
        return source, model_id

    def provider_kind(self, model: str | None) -> str:
        """The gate's provider kind of the model's source (``local-model`` when unknown)."""
        try:
            return self.resolve(model)[0].provider_kind
        except TextFailure:
            return "local-model"

    async def estimate(
        self, model: str | None, text_chars: int, max_tokens: int, choices: int
    ) -> tuple[str, Decimal]:
        """The provider kind and the worst-case cost of a call: every character a prompt
        token, every answer ``max_tokens`` long, at the source's listed prices (nothing for
        a source that lists none, as local ones do)."""
        try:
            source, model_id = self.resolve(model)
            info = await self._model_info(source, model_id)
        except TextFailure:
            return self.provider_kind(model), Decimal(0)
        prompt = (info.prompt_price or Decimal(0)) * text_chars
        answer = (info.completion_price or Decimal(0)) * max_tokens
        return source.provider_kind, (prompt + answer) * choices

    async def list_models(self, source: TextSource, fresh: bool = False) -> list[ModelInfo]:
        """The models ``source`` offers; ``source-down`` when it cannot be reached."""
        seen = self._models.get(source)
        if seen and not fresh and time.monotonic() - seen[0] < MODEL_LIST_SECONDS:
            return seen[1]
        try:
            models = await _WIRES[source.kind].list_models(self.session(), source)
        except (aiohttp.ClientConnectionError, asyncio.TimeoutError, OSError) as error:
            raise TextFailure(
                "source-down", f"{source.name} does not answer: {_why(error)}"
            ) from None
        except aiohttp.ClientError as error:
            raise TextFailure("upstream-malformed", f"{source.name}: {_why(error)}") from None
        self._models[source] = (time.monotonic(), models)
        return models

    async def generate(self, call: TextCall, on_chunk: ChunkHook | None = None) -> TextAnswer:
        """Answer ``call`` with ``call.choices`` alternatives from the model it names, or
        raise :class:`TextFailure`; ``deadline-exceeded`` (and every upstream request
        cancelled) when ``call.deadline`` seconds pass."""
        began = time.monotonic()
        source, model_id = self.resolve(call.model)
        first_piece: list[float] = []

        async def answer() -> list[ChatReply]:
            await self._model_info(source, model_id)
            return await asyncio.gather(
                *(
                    self._one(source, model_id, call, index, on_chunk, first_piece, began)
                    for index in range(call.choices)
                )
            )

        try:
            replies = await asyncio.wait_for(answer(), call.deadline)
        except asyncio.TimeoutError:
            raise TextFailure(
                "deadline-exceeded", f"no whole answer within {call.deadline:g} s"
            ) from None
        return TextAnswer(
            texts=[reply.text for reply in replies],
            cost=sum((reply.cost or Decimal(0) for reply in replies), Decimal(0)),
            provider=source.provider_kind,
            model=f"{source.name}/{model_id}",
            completion_tokens=sum(reply.completion_tokens or 0 for reply in replies),
            finish_reasons=[reply.finish_reason for reply in replies],
            first_piece_seconds=first_piece[0] if first_piece else None,
            first_tokens=replies[0].first_tokens if replies else None,
        )

    async def _model_info(self, source: TextSource, model_id: str) -> ModelInfo:
        """The listed entry of ``model_id``; the list is asked again once before
        ``unknown-model``, so a model loaded a moment ago is found."""
        wanted = _comparable(source, model_id)
        for fresh in (False, True):
            for info in await self.list_models(source, fresh=fresh):
                if _comparable(source, info.id) == wanted:
                    return info
        raise TextFailure("unknown-model", f"{source.name} has no model {model_id[:80]!r}")

    async def _one(
        self,
        source: TextSource,
        model_id: str,
        call: TextCall,
        index: int,
        on_chunk: ChunkHook | None,
        first_piece: list[float],
        began: float,
    ) -> ChatReply:
        async def on_delta(text: str, model: str | None) -> None:
            if model is not None and not _same_model(source, model, model_id):
                raise TextFailure(  # before any piece of another model's answer is sent
                    "model-mismatch", f"{source.name} answered with another model"
                )
            if not first_piece:
                first_piece.append(time.monotonic() - began)
            if on_chunk is not None:
                await on_chunk(index, text)

        request = ChatRequest(
            model_id,
            call.messages,
            call.max_tokens,
            call.temperature,
            stream=on_chunk is not None,
            top_logprobs=call.top_logprobs,
        )
        async with self._bound(source):
            self._running[source.name] = self._running.get(source.name, 0) + 1
            try:
                reply = await _WIRES[source.kind].chat(self.session(), source, request, on_delta)
            except (aiohttp.ClientConnectorError, ConnectionRefusedError) as error:
                raise TextFailure(
                    "source-down", f"{source.name} does not answer: {_why(error)}"
                ) from None
            except (aiohttp.ClientError, OSError) as error:
                raise TextFailure(
                    "upstream-failed", f"{source.name} broke off: {_why(error)}"
                ) from None
            finally:
                self._running[source.name] -= 1
        if reply.model is not None and not _same_model(source, reply.model, model_id):
            raise TextFailure("model-mismatch", f"{source.name} answered with another model")
        return reply

    def _bound(self, source: TextSource) -> asyncio.Semaphore:
        key = (source.name, source.max_concurrent)
        if key not in self._bounds:
            self._bounds[key] = asyncio.Semaphore(source.max_concurrent)
        return self._bounds[key]

    def in_flight(self, source_name: str) -> int:
        """Upstream requests running now at the source named ``source_name``."""
        return self._running.get(source_name, 0)

    def session(self) -> aiohttp.ClientSession:
        """The client session, made on first use in the running loop."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_SECONDS),
                trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    async def close(self) -> None:
        """Close the client session (requests still running are cut)."""
        if self._session is not None:
            await self._session.close()


def _same_model(source: TextSource, said: str, model_id: str) -> bool:
    """Whether the model a source said answered is ``model_id``."""
    return _comparable(source, said) == _comparable(source, model_id)


def _comparable(source: TextSource, model_id: str) -> str:
    return canonical_model(model_id) if source.kind == "ollama" else model_id


def _why(error: BaseException) -> str:
    return (str(error) or type(error).__name__)[:160]
