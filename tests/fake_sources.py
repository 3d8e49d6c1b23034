"""Loopback servers that speak Ollama's and OpenRouter's own wire formats, quirks included,
for the sources no real server can stand in for here.

Their answer is made from the last user message: its words, repeated, one word a token,
cut at the request's token bound. A message may steer the server with directives:
``#fail:http500``, ``#fail:midstream`` (an error after three tokens), ``#fail:drop`` (the
connection closes after three tokens), ``#fail:garbage`` (a line that is not JSON),
``#slow:S`` (S seconds before each token).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from aiohttp import web

from byoa_skills.bench.instant_source import end_events, open_events, send_event

OPENROUTER_KEY = "sk-or-v1-test-key"
OLLAMA_MODELS = ("echo:latest", "echo:7b")
#: id -> (prompt, completion) price per token in USD, as OpenRouter lists them.
OPENROUTER_MODELS = {
    "fake/echo-1": ("0.000001", "0.000002"),
    "fake/shifty": ("0", "0"),  # answers as another model, as a silent fallback would
}
_DIRECTIVE = re.compile(r"#(fail|slow):(\S+)")


@dataclass
class Recorded:
    """What a fake server was asked: each request's path, headers and JSON body."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    #: Chat requests that have started and not yet ended, and the most at once.
    running: int = 0
    peak: int = 0
    #: Chat requests that ended because the client went away.
    cancelled: int = 0

    async def request(self, request: web.Request) -> Any:
        """Record ``request`` (path, headers, JSON body); its body."""
        body = await request.json()
        self.requests.append({"path": request.path, "headers": dict(request.headers), "body": body})
        return body


def _words(messages: list[dict[str, Any]]) -> tuple[list[str], dict[str, str]]:
    last = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    directives = dict(_DIRECTIVE.findall(last))
    words = _DIRECTIVE.sub("", last).split() or ["empty"]
    return words, directives


def _tokens(messages: list[dict[str, Any]], bound: int) -> tuple[list[str], str, dict[str, str]]:
    """The answer's tokens, why it ends (``length`` or ``stop``), and the directives."""
    words, directives = _words(messages)
    wanted = 3 * len(words)
    count = min(bound, wanted) if bound > 0 else wanted
    tokens = [words[i % len(words)] + " " for i in range(count)]
    return tokens, "length" if count < wanted else "stop", directives


def _prompt_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content", "")).split()) + 1 for m in messages)


async def _pause(directives: dict[str, str]) -> None:
    if "slow" in directives:
        await asyncio.sleep(float(directives["slow"]))


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())


class _Tracked:
    """Counts a chat request as running, and as cancelled if its client goes away."""

    def __init__(self, recorded: Recorded) -> None:
        self.recorded = recorded

    def __enter__(self) -> None:
        self.recorded.running += 1
        self.recorded.peak = max(self.recorded.peak, self.recorded.running)

    def __exit__(self, kind: Any, *_: Any) -> None:
        self.recorded.running -= 1
        if kind is not None and issubclass(kind, (asyncio.CancelledError, ConnectionError)):
            self.recorded.cancelled += 1


# -- Ollama ------------------------------------------------------------------------------


def ollama_app(recorded: Recorded) -> web.Application:
    """Ollama's ``/api/tags`` and ``/api/chat``."""

    async def tags(request: web.Request) -> web.Response:
        models = [
            {
                "name": name,
                "model": name,
                "modified_at": "2026-11-01T10:00:00.000000000Z",
                "size": 1_234_567,
                "digest": f"{abs(hash(name)):064x}"[:64],
                "details": {
                    "format": "gguf",
                    "family": "echo",
                    "parameter_size": "135M",
                    "quantization_level": "Q4_1",
                },
            }
            for name in OLLAMA_MODELS
        ]
        return web.json_response({"models": models})

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await recorded.request(request)
        model = body.get("model", "")
        full = model if ":" in model else f"{model}:latest"
        if full not in OLLAMA_MODELS:
            return web.json_response(
                {"error": f'model "{model}" not found, try pulling it first'}, status=404
            )
        options = body.get("options") or {}
        tokens, reason, directives = _tokens(body["messages"], options.get("num_predict", -1))
        if directives.get("fail") == "http500":
            return web.json_response({"error": "llama runner process has terminated"}, 500)
        prompt = _prompt_tokens(body["messages"])
        last = {
            "model": model,
            "created_at": _now_iso(),
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": reason,
            "total_duration": 5_000_000,
            "load_duration": 1_000_000,
            "prompt_eval_count": prompt,
            "prompt_eval_duration": 1_000_000,
            "eval_count": len(tokens),
            "eval_duration": 3_000_000,
        }
        with _Tracked(recorded):
            if body.get("stream", True) is False:  # Ollama streams unless told not to
                for _ in tokens:
                    await _pause(directives)
                last["message"]["content"] = "".join(tokens)
                return web.json_response(last)
            response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
            await response.prepare(request)
            for index, token in enumerate(tokens):
                await _pause(directives)
                if index == 3 and _fails_midway(directives):
                    error = b'{"error":"an error was encountered while running the model"}\n'
                    garbage = b"<html>502 Bad Gateway</html>\n"
                    return await _fail_midway(request, response, directives, error, garbage)
                line = {
                    "model": model,
                    "created_at": _now_iso(),
                    "message": {"role": "assistant", "content": token},
                    "done": False,
                }
                await response.write(json.dumps(line).encode() + b"\n")
            await response.write(json.dumps(last).encode() + b"\n")
            await response.write_eof()
            return response

    app = web.Application()
    app.router.add_get("/api/tags", tags)
    app.router.add_post("/api/chat", chat)
    return app


def _fails_midway(directives: dict[str, str]) -> bool:
    return directives.get("fail") in ("midstream", "drop", "garbage")


async def _fail_midway(
    request: web.Request,
    response: web.StreamResponse,
    directives: dict[str, str],
    error: bytes,
    garbage: bytes,
) -> web.StreamResponse:
    """Break off an answer as its ``#fail`` directive says: the source's ``error`` message
    (``midstream``), ``garbage``, or a dropped connection (``drop``)."""
    kind = directives["fail"]
    if kind == "drop":
        _drop(request)
        return response
    await response.write(error if kind == "midstream" else garbage)
    await response.write_eof()
    return response


def _drop(request: web.Request) -> None:
    """Close the connection mid-answer, as a source that died would."""
    if request.transport is not None:
        request.transport.close()


# -- OpenRouter ----------------------------------------------------------------------------


def openrouter_app(recorded: Recorded) -> web.Application:
    """OpenRouter's ``/api/v1/models`` and ``/api/v1/chat/completions``."""

    async def models(request: web.Request) -> web.Response:
        data = [
            {
                "id": model,
                "canonical_slug": model,
                "name": model.split("/")[1].title(),
                "created": 1_760_000_000,
                "context_length": 8192,
                "architecture": {
                    "modality": "text->text",
                    "input_modalities": ["text"],
                    "output_modalities": ["text"],
                    "tokenizer": "Other",
                },
                "pricing": {
                    "prompt": prompt,
                    "completion": completion,
                    "request": "0",
                    "image": "0",
                    "web_search": "0",
                    "internal_reasoning": "0",
                },
                "top_provider": {
                    "context_length": 8192,
                    "max_completion_tokens": 4096,
                    "is_moderated": False,
                },
                "supported_parameters": ["max_tokens", "temperature", "stream"],
            }
            for model, (prompt, completion) in OPENROUTER_MODELS.items()
        ]
        return web.json_response({"data": data})

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await recorded.request(request)
        if request.headers.get("Authorization") != f"Bearer {OPENROUTER_KEY}":
            return _or_error(401, "No auth credentials found")
        model = body.get("model")
        if model not in OPENROUTER_MODELS:
            return _or_error(400, f"{model} is not a valid model ID")
        tokens, reason, directives = _tokens(body["messages"], body.get("max_tokens", 0))
        if directives.get("fail") == "http500":
            return _or_error(502, "Provider returned error")
        prompt_price, completion_price = map(Decimal, OPENROUTER_MODELS[model])
        prompt = _prompt_tokens(body["messages"])
        cost = prompt * prompt_price + len(tokens) * completion_price
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": len(tokens),
            "total_tokens": prompt + len(tokens),
            "cost": float(cost),
            "is_byok": False,
            "prompt_tokens_details": {"cached_tokens": 0},
            "cost_details": {"upstream_inference_cost": None},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }
        answered_as = "fake/echo-2" if model == "fake/shifty" else model
        generation = f"gen-{int(time.time())}-fake"
        with _Tracked(recorded):
            if not body.get("stream"):
                for _ in tokens:
                    await _pause(directives)
                return web.json_response(
                    {
                        "id": generation,
                        "provider": "Fake",
                        "model": answered_as,
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "choices": [
                            {
                                "logprobs": None,
                                "finish_reason": reason,
                                "native_finish_reason": reason,
                                "index": 0,
                                "message": {
                                    "role": "assistant",
                                    "content": "".join(tokens),
                                    "refusal": None,
                                    "reasoning": None,
                                },
                            }
                        ],
                        "usage": usage,
                    }
                )
            response = await open_events(
                request, {"Cache-Control": "no-cache", "X-Generation-Id": generation}
            )
            await response.write(b": OPENROUTER PROCESSING\n\n")

            def chunk(delta: dict[str, Any], finish: str | None, **extra: Any) -> dict[str, Any]:
                return {
                    "id": generation,
                    "provider": "Fake",
                    "model": answered_as,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "choices": [
                        {
                            "index": 0,
                            "delta": delta,
                            "finish_reason": finish,
                            "native_finish_reason": finish,
                            "logprobs": None,
                        }
                    ],
                    **extra,
                }

            for index, token in enumerate(tokens):
                await _pause(directives)
                if index == 3 and _fails_midway(directives):
                    failed = chunk(
                        {"content": ""},
                        "error",
                        error={"code": "server_error", "message": "Provider disconnected"},
                    )
                    error = f"data: {json.dumps(failed)}\n\n".encode()
                    garbage = b"data: {not json\n\n"
                    return await _fail_midway(request, response, directives, error, garbage)
                if index == 2:
                    await response.write(b": OPENROUTER PROCESSING\n\n")
                await send_event(response, chunk({"role": "assistant", "content": token}, None))
            await send_event(response, chunk({"role": "assistant", "content": ""}, reason))
            await send_event(
                response,
                {
                    "id": generation,
                    "provider": "Fake",
                    "model": answered_as,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "choices": [],
                    "usage": usage,
                },
            )
            return await end_events(response)

    app = web.Application()
    app.router.add_get("/api/v1/models", models)
    app.router.add_post("/api/v1/chat/completions", chat)
    return app


def _or_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"code": status, "message": message}}, status=status)


# -- running them --------------------------------------------------------------------------


@dataclass
class RunningServer:
    """A fake source on loopback, and what it was asked."""

    url: str
    recorded: Recorded


@contextmanager
def serving(app_factory: Any, port: int = 0) -> Iterator[RunningServer]:
    """Run ``app_factory(recorded)`` on loopback (a free port unless ``port`` is given) in a
    thread of its own."""
    recorded = Recorded()
    started = threading.Event()
    state: dict[str, Any] = {}

    def run() -> None:
        loop = asyncio.new_event_loop()
        runner = web.AppRunner(app_factory(recorded), access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", port)
        loop.run_until_complete(site.start())
        state["port"] = runner.addresses[0][1]
        state["loop"] = loop
        started.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(30)
    try:
        yield RunningServer(f"http://127.0.0.1:{state['port']}", recorded)
    finally:
        state["loop"].call_soon_threadsafe(state["loop"].stop)
        thread.join(10)
