"""A text source that answers at once: an OpenAI-compatible server whose every answer is the
same few tokens. With it the engine's own cost per text call is measured apart from any
model's. ``python -m byoa_skills.bench.instant_source --port P`` serves it on loopback."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from aiohttp import web

MODEL = "instant"
ANSWER = ["The", " answer", " is", " here", "."]


def build_app() -> web.Application:
    """``GET /v1/models`` and ``POST /v1/chat/completions`` (whole or streamed)."""

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        tokens = ANSWER[: max(1, int(body.get("max_tokens") or len(ANSWER)))]
        finish = "length" if len(tokens) < len(ANSWER) else "stop"
        head = {"id": "instant", "model": body.get("model"), "created": int(time.time())}
        usage = {
            "prompt_tokens": 8,
            "completion_tokens": len(tokens),
            "total_tokens": 8 + len(tokens),
        }
        if not body.get("stream"):
            message = {"role": "assistant", "content": "".join(tokens)}
            return web.json_response(
                {
                    **head,
                    "object": "chat.completion",
                    "usage": usage,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                }
            )
        response = await open_events(request)
        for index, token in enumerate(tokens):
            last = index == len(tokens) - 1
            choice = {
                "index": 0,
                "delta": {"content": token},
                "finish_reason": finish if last else None,
            }
            await send_event(
                response, {**head, "object": "chat.completion.chunk", "choices": [choice]}
            )
        return await end_events(response)

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def open_events(
    request: web.Request, headers: dict[str, str] | None = None
) -> web.StreamResponse:
    """A server-sent event stream for ``request``, its headers sent (``text/event-stream``
    and ``headers``)."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **(headers or {})})
    await response.prepare(request)
    return response


async def send_event(response: web.StreamResponse, payload: dict[str, Any]) -> None:
    """One ``data:`` event holding ``payload`` as JSON."""
    await response.write(f"data: {json.dumps(payload)}\n\n".encode())


async def end_events(response: web.StreamResponse) -> web.StreamResponse:
    """End the stream as OpenAI-compatible servers do (``data: [DONE]``); ``response``."""
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def main() -> None:
    """Serve on ``127.0.0.1:--port`` until stopped."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    web.run_app(build_app(), host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
