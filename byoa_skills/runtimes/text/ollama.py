"""Ollama's own API: ``GET /api/tags`` lists the models, ``POST /api/chat`` answers, streamed
as JSON lines (one object per line, the last with ``"done": true`` and the counts). A model
named without a tag is the ``:latest`` one. Errors come as ``{"error": "..."}``, with an HTTP
status before the answer starts, or as a line of the stream after."""

from __future__ import annotations

from typing import Any

import aiohttp

from byoa_skills.runtimes.text.config import TextSource
from byoa_skills.runtimes.text.errors import TextFailure
from byoa_skills.runtimes.text.wire import (
    ChatReply,
    ChatRequest,
    DeltaHook,
    ModelInfo,
    get_json,
    json_object,
    lines,
    refusal_of,
    token_count,
)


def canonical_model(name: str) -> str:
    """The name with its tag: ``llama3.2`` is ``llama3.2:latest``."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


class OllamaWire:
    """Speaks Ollama's ``/api`` format."""

    async def list_models(
        self, session: aiohttp.ClientSession, source: TextSource
    ) -> list[ModelInfo]:
        """The models ``/api/tags`` lists, by their full names."""
        body = await get_json(session, f"{source.url}/api/tags", source, "the model list")
        models = body.get("models")
        if not isinstance(models, list):
            raise TextFailure("upstream-malformed", "the model list has no models array")
        return [
            ModelInfo(entry["name"])
            for entry in models
            if isinstance(entry, dict) and isinstance(entry.get("name"), str)
        ]

    async def chat(
        self,
        session: aiohttp.ClientSession,
        source: TextSource,
        request: ChatRequest,
        on_delta: DeltaHook | None,
    ) -> ChatReply:
        """One chat answer, streamed or whole."""
        options: dict[str, Any] = {"num_predict": request.max_tokens}
        if request.temperature is not None:
            options["temperature"] = request.temperature
        body = {
            "model": request.model,
            "messages": request.messages,
            "stream": request.stream,
            "options": options,
        }
        async with session.post(f"{source.url}/api/chat", json=body) as response:
            if response.status != 200:
                raise await refusal_of(response, source)
            reply = ChatReply()
            if not request.stream:
                _take(reply, json_object(await response.read(), "the answer"))
                reply.text = "".join(reply.pieces)
                return reply
            done = False
            async for line in lines(response):
                if not line.strip():
                    continue
                piece = _take(reply, json_object(line, "a streamed line"))
                if piece and on_delta is not None:
                    await on_delta(piece, reply.model)
                if reply.finish_reason is not None:
                    done = True
                    break
            if not done:
                raise TextFailure("upstream-malformed", "the stream ended before its last line")
            reply.text = "".join(reply.pieces)
            return reply


def _take(reply: ChatReply, line: dict[str, Any]) -> str:
    """Add one line (or the whole answer) to the reply; the text it carried."""
    error = line.get("error")
    if error is not None:
        raise TextFailure("upstream-error", str(error)[:200])
    message = line.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise TextFailure("upstream-malformed", "a line has no message content")
    if reply.model is None and isinstance(line.get("model"), str):
        reply.model = line["model"]
    if content:
        reply.pieces.append(content)
    if line.get("done") is True:
        reason = line.get("done_reason")
        reply.finish_reason = reason if isinstance(reason, str) else "stop"
        reply.prompt_tokens = token_count(line.get("prompt_eval_count"))
        reply.completion_tokens = token_count(line.get("eval_count"))
    elif line.get("done") is not False:
        raise TextFailure("upstream-malformed", "a line has no done flag")
    return content
