"""A recording answered as server-sent events: a ``transcript.text.delta`` per piece with
speech, in order, as soon as every piece before it is done, then ``transcript.text.done``."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from byoa_skills.protocol.codes import status_of
from byoa_skills.recordings import (
    ClientGone,
    Piece,
    RecordingFailure,
    RecordingOptions,
    RecordingProgress,
    RecordingService,
)
from byoa_skills.recordings.line import Place
from byoa_skills.recordings.service import ClientCheck
from byoa_skills.serve.openai_api.shape import error_body


async def stream(
    request: web.Request,
    recordings: RecordingService,
    data: bytes,
    options: RecordingOptions,
    *,
    client_gone: ClientCheck,
    progress: RecordingProgress,
    place: Place | None = None,
) -> tuple[web.StreamResponse, str]:
    """The recording ``data`` transcribed by ``recordings`` and written to ``request``'s
    client as events, and the outcome (``ok`` or a code). The events begin once the file is
    measured; a failure after that is the last event, an ``error`` in OpenAI's shape, and
    one before them (the file refused) is raised as :class:`RecordingFailure`. A client that
    leaves raises :class:`ClientGone`."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    said: list[str] = []

    async def send(event: dict[str, Any]) -> None:
        try:
            await response.write(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
        except ConnectionResetError:
            raise ClientGone() from None

    async def begin(seconds: float) -> None:
        await response.prepare(request)

    async def on_piece(piece: Piece, text: str) -> None:
        if text.strip():
            delta = (" " if said else "") + text.strip()
            said.append(text.strip())
            await send({"type": "transcript.text.delta", "delta": delta})

    try:
        heard = await recordings.transcribe(
            data,
            options,
            on_measured=begin,
            on_piece=on_piece,
            client_gone=client_gone,
            progress=progress,
            place=place,
        )
    except RecordingFailure as failure:  # once the events have begun: the last event
        if not response.prepared:
            raise
        status = status_of(failure.code)
        await send({"type": "error", **error_body(failure.code, failure.message, status)})
        await response.write_eof()
        return response, failure.code
    await send(
        {
            "type": "transcript.text.done",
            "text": " ".join(said),
            "usage": {"type": "duration", "seconds": round(heard.duration, 3)},
        }
    )
    await response.write_eof()
    return response, "ok"
