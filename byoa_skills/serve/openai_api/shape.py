"""Refusals in OpenAI's shape, ``{"error": {"message", "type", "code", "param"}}``, with the
engine's stable code and its status from the one table; and the rewriting of the refusals the
rest of the local API writes (the guard's, for a wrong key) on these routes' paths."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from byoa_skills.protocol.codes import status_of
from byoa_skills.protocol.refusal import Refusal

#: The paths whose refusals are written in OpenAI's shape.
PATHS = ("/v1/audio/", "/v1/models")


class Refused(Refusal):
    """A request these routes refuse: a stable code and a one-line message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message, text=message)


def error_body(code: str, message: str, status: int) -> dict[str, Any]:
    """OpenAI's error object for one of our refusals."""
    kind = "server_error" if status >= 500 else "invalid_request_error"
    if status == 401:
        kind = "authentication_error"
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


def refused(code: str, message: str) -> web.Response:
    """The refusal ``code`` in OpenAI's shape, with its HTTP status."""
    status = status_of(code)
    return web.json_response(error_body(code, message, status), status=status)


async def in_openai_shape(request: web.Request, response: web.StreamResponse) -> None:
    """Rewrite a refusal the rest of the local API wrote (``{"ok": false, "code",
    "message"}``, the guard's for a wrong key) in OpenAI's shape, on :data:`PATHS`."""
    if not request.path.startswith(PATHS) or response.status < 400:
        return
    if not isinstance(response, web.Response) or response.content_type != "application/json":
        return
    try:
        body = json.loads(response.body or b"")  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return
    if isinstance(body, dict) and body.get("ok") is False and "code" in body:
        shaped = error_body(str(body["code"]), str(body.get("message", "")), response.status)
        data = json.dumps(shaped).encode()
        response.body = data
        response.headers["Content-Length"] = str(len(data))  # the headers are made already
