"""A request's JSON body and the local API's refusal shape, for every route that reads one
(the core API, the wallet page's routes, the extension's routes)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from byoa_skills.protocol.frames import MAX_FRAME_BYTES, FrameError, read_json_object
from byoa_skills.protocol.refusal import Refusal


def refusal(status: int, code: str, message: str) -> web.Response:
    """A JSON refusal ``{"ok": false, "code", "message"}`` with an HTTP status."""
    return web.json_response({"ok": False, "code": code, "message": message}, status=status)


async def json_body(request: web.Request) -> dict[str, Any] | web.Response:
    """The request's JSON object (read as every frame is read), or the refusal to answer
    instead: 413 ``message-too-large``, 400 ``not-json`` or ``bad-request``."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return refusal(413, "message-too-large", f"the body is over {MAX_FRAME_BYTES} bytes")
    try:
        return read_json_object(raw.decode("utf-8"), "body")
    except UnicodeDecodeError:
        return refusal(400, "not-json", "the body is not JSON")
    except FrameError as refused:
        status = 413 if refused.code == "message-too-large" else 400
        return refusal(status, refused.code, refused.message)


def choice_refusal(refused: Refusal) -> web.Response:
    """400 with the visitor's choices refused: the first problem's code and message, and
    every problem ``{code, path, message}`` in ``errors``."""
    problems = getattr(refused, "problems", [])
    return web.json_response(
        {"ok": False, "code": refused.code, "message": refused.message, "errors": problems},
        status=400,
    )
