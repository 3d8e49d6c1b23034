"""``POST /v1/audio/transcriptions`` and ``POST /v1/audio/translations``: one file, held in
the uploads' line while it is received and waits, checked, transcribed by the recordings'
service in its turn (stopped when the client leaves), answered in the format asked, and
reported: one activity entry of the local client and the call counted by the skill engine."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web

from byoa_skills.protocol.refusal import Refusal
from byoa_skills.recordings import CLIENT_GONE, SKILL, ClientGone, RecordingProgress, Task
from byoa_skills.recordings.line import Place
from byoa_skills.serve.openai_api.door import DOOR, Door
from byoa_skills.serve.openai_api.form import read_form
from byoa_skills.serve.openai_api.formats import answer
from byoa_skills.serve.openai_api.shape import Refused, refused
from byoa_skills.serve.openai_api.streaming import stream


async def transcriptions(request: web.Request) -> web.StreamResponse:
    """The text spoken in the file, in its language."""
    return await _audio(request, "transcribe")


async def translations(request: web.Request) -> web.StreamResponse:
    """The text spoken in the file, in English."""
    return await _audio(request, "translate")


async def _audio(request: web.Request, task: Task) -> web.StreamResponse:
    door = request.app[DOOR]
    began = time.monotonic()
    progress, outcome = RecordingProgress(), "ok"
    recordings = door.recordings
    place: Place | None = None
    try:
        if recordings is None:
            raise Refused("skill-unavailable", "no speech model runs here")
        place = recordings.line.enter(request.content_length or 0)
        form = await read_form(request, door.limits, recordings.model_name, place.grow)
        if not recordings.ready:
            raise Refused("not-ready", "the speech workers are still loading")
        options, gone = form.options(task), client_gone(request)
        if form.stream:
            response, outcome = await stream(
                request,
                recordings,
                form.data,
                options,
                client_gone=gone,
                progress=progress,
                place=place,
            )
        else:
            heard = await recordings.transcribe(
                form.data, options, client_gone=gone, progress=progress, place=place
            )
            response = answer(heard, form.response_format, task)
    except Refusal as refusal:
        _report(door, task, refusal.code, progress, began)
        return refused(refusal.code, refusal.message)
    except ClientGone:
        _report(door, task, CLIENT_GONE, progress, began)
        return web.Response(status=499)  # nobody reads it
    finally:
        if place is not None:
            place.leave()
    _report(door, task, outcome, progress, began)
    return response


def client_gone(request: web.Request) -> Callable[[], bool]:
    """Whether the client of ``request`` has closed its connection."""

    def gone() -> bool:
        transport = request.transport
        return transport is None or transport.is_closing()

    return gone


def _report(
    door: Door, task: Task, outcome: str, progress: RecordingProgress, began: float
) -> None:
    """One activity entry (the local client's, no content) and the call reported to the
    skill engine, both under the same skill (:data:`~byoa_skills.recordings.SKILL`)."""
    latency = time.monotonic() - began
    seconds = progress.seconds
    door.shim.record_activity(
        kind="local",
        client="openai-api",
        skill=SKILL,
        task=task,
        outcome=outcome,
        clipSeconds=None if seconds is None else round(seconds, 3),
        pieces=progress.answered if seconds is not None else None,
        latencyMs=round(latency * 1000),
    )
    measured = {} if seconds is None else {"clipSeconds": round(seconds, 3)}
    facts = {"task": task} if seconds is None else {"task": task, "pieces": progress.answered}
    door.engine.report_outcome(SKILL, outcome, latency, measured=measured, facts=facts)
