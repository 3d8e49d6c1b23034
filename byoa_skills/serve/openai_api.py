"""The OpenAI-compatible routes of the local API, for the visitor's own tools:
``POST /v1/audio/transcriptions``, ``POST /v1/audio/translations`` and ``GET /v1/models``.

They take what the ``openai`` SDK sends (multipart ``file``, ``model``, ``language``,
``prompt``, ``response_format``, ``temperature``, ``timestamp_granularities[]``, ``stream``)
and answer as OpenAI does. The engine's token is the API key (the local API's guard checks
it); every refusal on these paths, the guard's included, is written in OpenAI's shape
``{"error": {"message", "type", "code"}}`` with the engine's stable code.

The recording itself is :class:`~byoa_skills.recordings.RecordingService`'s: any audio format
decoded to 16 kHz mono, a long recording cut into pieces that run on every worker at once
behind the sites' clips, a few recordings at a time, stopped when its client leaves, and the
answer stitched back in order. These routes keep the form, the limits and the answer's
formats. These calls need no grant: Activity lists each one as the local client's
(``kind: "local"``), never with its audio or text; a translation is ``audio.transcribe`` with
``task: "translate"``, in Activity and the metrics alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import BodyPartReader, MultipartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from byoa_skills.models import ModelError, require_language
from byoa_skills.protocol.codes import status_of
from byoa_skills.protocol.refusal import Refusal
from byoa_skills.recordings import (
    CLIENT_CHECK_SECONDS,
    CLIENT_GONE,
    DEFAULT_AT_ONCE,
    DEFAULT_MAX_SECONDS,
    SKILL,
    ClientGone,
    Piece,
    RecordingFailure,
    RecordingOptions,
    RecordingProgress,
    RecordingResult,
    RecordingService,
    Task,
    srt,
    vtt,
)
from byoa_skills.skills import CallResult, SkillEngine
from byoa_skills.wallet_shim.shim import WalletShim

#: The model name OpenAI's tools send by default; it stands for the engine's speech model.
WHISPER_ALIAS = "whisper-1"
#: The largest file taken by default, in bytes (OpenAI's own limit).
DEFAULT_MAX_UPLOAD_BYTES = 25 * 1024 * 1024
#: Environment variables that change the limits: megabytes, minutes of audio, and how many
#: recordings are decoded at once.
UPLOAD_LIMIT_ENV = "BYOA_SKILLS_MAX_UPLOAD_MB"
DURATION_LIMIT_ENV = "BYOA_SKILLS_MAX_RECORDING_MINUTES"
AT_ONCE_ENV = "BYOA_SKILLS_RECORDINGS_AT_ONCE"
RESPONSE_FORMATS = ("json", "text", "verbose_json", "srt", "vtt")
#: The most bytes a form field other than ``file`` may have.
MAX_FIELD_BYTES = 64 * 1024
#: The most parts a form may have, and the bytes a body may have beyond the file's limit.
MAX_PARTS = 32
FORM_OVERHEAD_BYTES = MAX_FIELD_BYTES * 16
#: How long one text source may take to list its models for ``GET /v1/models``, in seconds.
MODEL_LIST_SECONDS = 2.0

_PATHS = ("/v1/audio/", "/v1/models")


@dataclass(frozen=True)
class UploadLimits:
    """The largest file (bytes), the longest recording (seconds) these routes take, and how
    many recordings are decoded at once (``at_once``). Checked when made: ``ValueError``
    for a value that is not finite and above 0 (``at_once``: a whole number of at least 1).
    """

    max_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    max_seconds: float = DEFAULT_MAX_SECONDS
    at_once: int = DEFAULT_AT_ONCE

    def __post_init__(self) -> None:
        if isinstance(self.max_bytes, bool) or not isinstance(self.max_bytes, int):
            raise ValueError(f"max_bytes must be a whole number, got {self.max_bytes!r}")
        if self.max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {self.max_bytes!r}")
        if not _finite_positive(self.max_seconds):
            raise ValueError(f"max_seconds must be a finite number above 0, got "
                             f"{self.max_seconds!r}")  # fmt: skip
        if isinstance(self.at_once, bool) or not isinstance(self.at_once, int) or self.at_once < 1:
            raise ValueError(f"at_once must be a whole number of at least 1, got {self.at_once!r}")

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> UploadLimits:
        """The limits :data:`UPLOAD_LIMIT_ENV`, :data:`DURATION_LIMIT_ENV` and
        :data:`AT_ONCE_ENV` set, else the defaults. Raises ``ValueError`` with a one-line
        message naming the variable for a value that is not a finite number above 0 (for
        :data:`AT_ONCE_ENV`, not a whole number of at least 1)."""
        env = dict(os.environ if env is None else env)
        limits = cls()
        megabytes = _positive(env, UPLOAD_LIMIT_ENV)
        minutes = _positive(env, DURATION_LIMIT_ENV)
        at_once = _whole(env, AT_ONCE_ENV)
        max_bytes = int(megabytes * 1024 * 1024) if megabytes else limits.max_bytes
        if max_bytes < 1:
            raise ValueError(f"{UPLOAD_LIMIT_ENV} must be at least one byte, got "
                             f"{env[UPLOAD_LIMIT_ENV]!r}")  # fmt: skip
        return cls(
            max_bytes=max_bytes,
            max_seconds=minutes * 60 if minutes else limits.max_seconds,
            at_once=at_once or limits.at_once,
        )


ENGINE = web.AppKey("openai_engine", SkillEngine)
SHIM = web.AppKey("openai_shim", WalletShim)
LIMITS = web.AppKey("openai_limits", UploadLimits)
#: The recordings' service, when speech runs here (None without a pool).
RECORDINGS: web.AppKey[RecordingService | None] = web.AppKey("openai_recordings")


def add_openai_routes(
    app: web.Application,
    engine: SkillEngine,
    shim: WalletShim,
    limits: UploadLimits | None = None,
) -> None:
    """Add the OpenAI-compatible routes to the local API ``app`` (limits from the
    environment when not given), and write every refusal on their paths in OpenAI's shape."""
    app[ENGINE] = engine
    app[SHIM] = shim
    app[LIMITS] = limits = limits or UploadLimits.from_env()
    pool = engine.pool
    app[RECORDINGS] = (
        RecordingService.on_pool(pool, limits.max_seconds, limits.at_once)
        if pool is not None
        else None
    )
    app.router.add_post("/v1/audio/transcriptions", _transcriptions)
    app.router.add_post("/v1/audio/translations", _translations)
    app.router.add_get("/v1/models", _models)
    app.on_response_prepare.append(_in_openai_shape)


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


# -- the form ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AudioForm:
    """What one request asks, checked."""

    data: bytes
    model: str
    language: str | None
    prompt: str | None
    response_format: str
    granularities: frozenset[str]
    stream: bool

    temperature: float = 0.0

    def options(self, task: Task) -> RecordingOptions:
        """What the recording's transcript is asked to be, for ``task``."""
        timestamps = "none"
        if self.response_format in ("verbose_json", "srt", "vtt"):
            timestamps = "word" if "word" in self.granularities else "segment"
        return RecordingOptions(
            language=self.language, task=task, prompt=self.prompt,
            temperature=self.temperature, timestamps=timestamps,  # type: ignore[arg-type]
        )  # fmt: skip


async def read_form(request: web.Request, limits: UploadLimits, speech_model: str) -> AudioForm:
    """The multipart form the SDK sends, checked; :class:`Refused` for anything wrong. The
    whole body, with or without a Content-Length (chunked), may be at most the file's limit
    and :data:`FORM_OVERHEAD_BYTES`, in at most :data:`MAX_PARTS` parts: ``file-too-large``
    as soon as it is more."""
    if not request.content_type.startswith("multipart/"):
        raise Refused("bad-request", "send the audio as multipart/form-data, as the SDK does")
    if (request.content_length or 0) > limits.max_bytes + FORM_OVERHEAD_BYTES:
        raise _too_large(limits)
    reading = asyncio.ensure_future(
        _read_fields(request, await request.multipart(), limits, speech_model)
    )
    try:
        while True:  # the parts are counted as they are read; this counts what comes between
            done, _ = await asyncio.wait({reading}, timeout=CLIENT_CHECK_SECONDS / 5)
            if done:
                return reading.result()
            if request.content.total_bytes > limits.max_bytes + FORM_OVERHEAD_BYTES:
                raise _too_large(limits)
    except (HttpProcessingError, ValueError, AssertionError) as error:
        raise Refused("bad-request", f"the form cannot be read: {str(error)[:80]}") from None
    finally:
        if not reading.done():
            reading.cancel()
            with contextlib.suppress(BaseException):
                await reading


async def _read_fields(
    request: web.Request, reader: MultipartReader, limits: UploadLimits, speech_model: str
) -> AudioForm:
    fields: dict[str, list[str]] = {}
    data: bytes | None = None
    budget = limits.max_bytes + FORM_OVERHEAD_BYTES

    def within_budget() -> None:  # every byte received so far: part headers included
        if request.content.total_bytes > budget:
            raise _too_large(limits)

    parts = 0
    while (part := await reader.next()) is not None:
        within_budget()
        parts += 1
        if parts > MAX_PARTS:
            raise Refused("bad-request", f"the form has more than {MAX_PARTS} parts")
        if not isinstance(part, BodyPartReader):
            raise Refused("bad-request", "nested multipart bodies are not taken")
        if part.name == "file":
            data = await _read_part(part, limits.max_bytes, _too_large(limits), within_budget)
        else:
            too_long = Refused("bad-request", f"the field {str(part.name)[:40]!r} is too long")
            raw = await _read_part(part, MAX_FIELD_BYTES, too_long, within_budget)
            fields.setdefault(str(part.name), []).append(raw.decode("utf-8", "replace"))
    within_budget()
    if data is None:
        raise Refused("missing-file", "the form has no 'file' field")
    return _checked(fields, data, speech_model)


def _checked(fields: dict[str, list[str]], data: bytes, speech_model: str) -> AudioForm:
    def one(name: str) -> str | None:
        values = fields.get(name)
        return values[-1].strip() if values else None

    model = one("model")
    if not model:
        raise Refused("bad-params", "name a model: whisper-1 or " + speech_model)
    if model not in (WHISPER_ALIAS, speech_model):
        raise Refused("unknown-model", f"no model {model[:60]!r} here; GET /v1/models lists them")
    response_format = one("response_format") or "json"
    if response_format not in RESPONSE_FORMATS:
        raise Refused("bad-params", f"response_format must be one of {', '.join(RESPONSE_FORMATS)}")
    temperature = one("temperature")
    if temperature is not None and not _fraction(temperature):
        raise Refused("bad-params", "temperature must be a number from 0 to 1")
    granularities = frozenset(
        fields.get("timestamp_granularities[]", []) + fields.get("timestamp_granularities", [])
    )
    if not granularities <= {"segment", "word"}:
        raise Refused("bad-params", "timestamp_granularities[] takes segment and word")
    if granularities and response_format != "verbose_json":
        raise Refused("bad-params", "timestamp_granularities[] needs response_format verbose_json")
    stream = (one("stream") or "false").lower()
    if stream not in ("true", "false"):
        raise Refused("bad-params", "stream must be true or false")
    if stream == "true" and response_format not in ("json", "text"):
        raise Refused("bad-params", "stream takes response_format json or text")
    language = one("language") or None
    if language is not None:
        try:
            require_language(speech_model, language)
        except ModelError as error:
            raise Refused(error.code, error.message) from None
    return AudioForm(data, model, language, one("prompt") or None, response_format,
                     granularities, stream == "true", float(temperature or 0))  # fmt: skip


async def _read_part(part: BodyPartReader, limit: int, over: Refused, within_budget: Any) -> bytes:
    kept, size = io.BytesIO(), 0  # its value is its buffer: the file is held once, not twice
    while chunk := await part.read_chunk(256 * 1024):
        size += len(chunk)
        if size > limit:
            raise over
        within_budget()
        kept.write(chunk)
    return kept.getvalue()


def _too_large(limits: UploadLimits) -> Refused:
    return Refused("file-too-large", f"the file is over {limits.max_bytes / 2**20:g} MB")


# -- the routes -------------------------------------------------------------------------


async def _transcriptions(request: web.Request) -> web.StreamResponse:
    return await _audio(request, "transcribe")


async def _translations(request: web.Request) -> web.StreamResponse:
    return await _audio(request, "translate")


async def _audio(request: web.Request, task: Task) -> web.StreamResponse:
    """One file: checked, then transcribed by the recordings' service (in its turn, stopped
    if the client leaves first), answered in the format asked."""
    began = time.monotonic()
    progress, outcome = RecordingProgress(), "ok"
    recordings = request.app[RECORDINGS]
    try:
        if recordings is None:
            raise Refused("skill-unavailable", "no speech model runs here")
        form = await read_form(request, request.app[LIMITS], recordings.model_name)
        if not recordings.ready:
            raise Refused("not-ready", "the speech workers are still loading")
        if form.stream:
            response, outcome = await _stream(request, recordings, form, task, progress)
        else:
            heard = await recordings.transcribe(
                form.data, form.options(task), client_gone=_client_gone(request),
                progress=progress,
            )  # fmt: skip
            response = _answer(heard, form.response_format, task)
    except (Refused, RecordingFailure) as refusal:
        _record(request, task, refusal.code, progress, began)
        return refused(refusal.code, refusal.message)
    except ClientGone:
        _record(request, task, CLIENT_GONE, progress, began)
        return web.Response(status=499)  # nobody reads it
    _record(request, task, outcome, progress, began)
    return response


def _client_gone(request: web.Request) -> Callable[[], bool]:
    """Whether the client of ``request`` has closed its connection."""

    def gone() -> bool:
        transport = request.transport
        return transport is None or transport.is_closing()

    return gone


async def _stream(
    request: web.Request, recordings: RecordingService, form: AudioForm, task: Task,
    progress: RecordingProgress,
) -> tuple[web.StreamResponse, str]:  # fmt: skip
    """Server-sent events: a ``transcript.text.delta`` per piece as soon as the pieces before
    it are done, then ``transcript.text.done`` with the whole text; and the outcome. A
    failure once the events have begun is the last event, an ``error`` in OpenAI's shape;
    one before them (the file refused) is raised."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})  # fmt: skip
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
            form.data, form.options(task), on_measured=begin, on_piece=on_piece,
            client_gone=_client_gone(request), progress=progress,
        )  # fmt: skip
    except RecordingFailure as failure:  # once the events have begun: the last event
        if not response.prepared:
            raise
        status = status_of(failure.code)
        await send({"type": "error", **error_body(failure.code, failure.message, status)})
        await response.write_eof()
        return response, failure.code
    await send({"type": "transcript.text.done", "text": " ".join(said),
                "usage": {"type": "duration", "seconds": round(heard.duration, 3)}})  # fmt: skip
    await response.write_eof()
    return response, "ok"


def _answer(heard: RecordingResult, response_format: str, task: Task) -> web.Response:
    if response_format == "text":
        return web.Response(text=heard.text + "\n", content_type="text/plain")
    if response_format == "srt":
        return web.Response(text=srt(heard.segments), content_type="text/plain")
    if response_format == "vtt":
        return web.Response(text=vtt(heard.segments), content_type="text/vtt")
    usage = {"type": "duration", "seconds": round(heard.duration, 3)}
    if response_format == "json":
        return web.json_response({"text": heard.text, "usage": usage})
    return web.json_response(verbose_json(heard, task) | {"usage": usage})


def verbose_json(heard: RecordingResult, task: str) -> dict[str, Any]:
    """The ``verbose_json`` body: the text, the language code, the duration, the segments
    and, when word timestamps were decoded, every word on the recording's timeline."""
    segments = [
        {
            "id": number,
            "seek": round(s.start * 100),
            "start": s.start,
            "end": s.end,
            "text": s.text,
            "tokens": list(s.tokens),
            "temperature": 0.0,
            "avg_logprob": s.avg_logprob,
            "compression_ratio": s.compression_ratio,
            "no_speech_prob": s.no_speech_prob,
        }
        for number, s in enumerate(heard.segments)
    ]
    body: dict[str, Any] = {
        "task": task,
        "language": heard.language or "",
        "duration": round(heard.duration, 3),
        "text": heard.text,
        "segments": segments,
    }
    words = [w for s in heard.segments for w in s.words]
    if words:
        body["words"] = [{"word": w.word.strip(), "start": w.start, "end": w.end} for w in words]
    return body


async def _models(request: web.Request) -> web.Response:
    """The speech model (under its name and ``whisper-1``), then each text source's models
    as ``SOURCE/MODEL``, the name a grant's model codes give them; a source that does not
    answer within :data:`MODEL_LIST_SECONDS` is left out."""
    engine, recordings = request.app[ENGINE], request.app[RECORDINGS]
    ids: list[tuple[str, str]] = []
    if recordings is not None:
        ids += [(WHISPER_ALIAS, "byoa-skills"), (recordings.model_name, "byoa-skills")]
    if engine.text is not None:
        ids += await _text_models(engine)
    data = [{"id": i, "object": "model", "created": 0, "owned_by": owner} for i, owner in ids]
    return web.json_response({"object": "list", "data": data})


async def _text_models(engine: SkillEngine) -> list[tuple[str, str]]:
    text = engine.text
    assert text is not None
    try:
        sources = list(text.config().sources.values())
    except Exception:  # a damaged sources file lists no text models
        return []

    async def listed(source: Any) -> list[tuple[str, str]]:
        try:
            models = await asyncio.wait_for(text.list_models(source), MODEL_LIST_SECONDS)
        except Exception:  # a source that is down is left out
            return []
        return [(f"{source.name}/{model.id}", source.name) for model in models]

    found = await asyncio.gather(*(listed(source) for source in sources))
    return [entry for entries in found for entry in entries]


# -- what every answer shares -----------------------------------------------------------


def _record(
    request: web.Request, task: Task, outcome: str, progress: RecordingProgress, began: float
) -> None:
    """One activity entry (the local client's, no content) and the call counted in the
    metrics, both under the same skill (:data:`~byoa_skills.recordings.SKILL`)."""
    latency = time.monotonic() - began
    seconds = progress.seconds
    shim = request.app[SHIM]
    shim.record_activity(
        kind="local", client="openai-api", skill=SKILL, task=task, outcome=outcome,
        clipSeconds=None if seconds is None else round(seconds, 3),
        pieces=progress.answered if seconds is not None else None,
        latencyMs=round(latency * 1000),
    )  # fmt: skip
    result = CallResult(ok=True) if outcome == "ok" else CallResult.refused(outcome, "")
    measured = {} if seconds is None else {"clipSeconds": round(seconds, 3)}
    request.app[ENGINE].report(SKILL, replace(result, measured=measured), latency)


async def _in_openai_shape(request: web.Request, response: web.StreamResponse) -> None:
    """Rewrite a refusal the rest of the local API wrote (``{"ok": false, "code",
    "message"}``, the guard's for a wrong key) in OpenAI's shape, on these routes' paths."""
    if not request.path.startswith(_PATHS) or response.status < 400:
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


def _positive(env: dict[str, str], name: str) -> float | None:
    value = env.get(name)
    if value is None or not value.strip():
        return None
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not _finite_positive(number):
        raise ValueError(f"{name} must be a finite number above 0, got {value!r}")
    return number


def _whole(env: dict[str, str], name: str) -> int | None:
    value = env.get(name)
    if value is None or not value.strip():
        return None
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")
    return number


def _finite_positive(number: Any) -> bool:
    return (
        isinstance(number, (int, float))
        and not isinstance(number, bool)
        and math.isfinite(number)
        and number > 0
    )


def _fraction(text: str) -> bool:
    try:
        return 0.0 <= float(text) <= 1.0
    except ValueError:
        return False
