"""The multipart form OpenAI's SDK sends, read within its limits and checked: the file, the
model, the language, the prompt, the answer's format, the granularities, ``stream``."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import BodyPartReader, MultipartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from byoa_skills.models import ModelError, require_language
from byoa_skills.protocol.refusal import Refusal
from byoa_skills.recordings import CLIENT_CHECK_SECONDS, RecordingOptions, Task
from byoa_skills.serve.openai_api.formats import RESPONSE_FORMATS
from byoa_skills.serve.openai_api.limits import UploadLimits
from byoa_skills.serve.openai_api.shape import Refused

#: The model name OpenAI's tools send by default; it stands for the engine's speech model.
WHISPER_ALIAS = "whisper-1"
#: The most bytes a form field other than ``file`` may have.
MAX_FIELD_BYTES = 64 * 1024
#: The most parts a form may have, and the bytes a body may have beyond the file's limit.
MAX_PARTS = 32
FORM_OVERHEAD_BYTES = MAX_FIELD_BYTES * 16

#: ``received(total)``: told how many bytes of the body have arrived so far; raises a
#: :class:`~byoa_skills.protocol.refusal.Refusal` to stop reading.
ReceivedHook = Callable[[int], None]


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
            language=self.language,
            task=task,
            prompt=self.prompt,
            temperature=self.temperature,
            timestamps=timestamps,  # type: ignore[arg-type]
        )


async def read_form(
    request: web.Request,
    limits: UploadLimits,
    speech_model: str,
    received: ReceivedHook | None = None,
) -> AudioForm:
    """The multipart form the SDK sends, checked; :class:`Refused` for anything wrong. The
    whole body, with or without a Content-Length (chunked), may be at most the file's limit
    and :data:`FORM_OVERHEAD_BYTES`, in at most :data:`MAX_PARTS` parts: ``file-too-large``
    as soon as it is more. ``received`` hears the bytes arrived so far as they come, and
    what it raises stops the reading and is raised."""
    if not request.content_type.startswith("multipart/"):
        raise Refused("bad-request", "send the audio as multipart/form-data, as the SDK does")
    if (request.content_length or 0) > limits.max_bytes + FORM_OVERHEAD_BYTES:
        raise _too_large(limits)
    counted = _Counter(request, limits, received)
    reading = asyncio.ensure_future(
        _read_fields(await request.multipart(), limits, speech_model, counted)
    )
    try:
        while True:  # the parts are counted as they are read; this counts what comes between
            done, _ = await asyncio.wait({reading}, timeout=CLIENT_CHECK_SECONDS / 5)
            if done:
                return reading.result()
            counted.check()
    except Refusal:
        raise
    except (HttpProcessingError, ValueError, AssertionError) as error:
        raise Refused("bad-request", f"the form cannot be read: {str(error)[:80]}") from None
    finally:
        if not reading.done():
            reading.cancel()
            with contextlib.suppress(BaseException):
                await reading


class _Counter:
    """Every byte received so far, part headers included, within the body's limit and told
    to ``received``."""

    def __init__(
        self, request: web.Request, limits: UploadLimits, received: ReceivedHook | None
    ) -> None:
        self._request = request
        self._limits = limits
        self._received = received

    def check(self) -> None:
        total = self._request.content.total_bytes
        if total > self._limits.max_bytes + FORM_OVERHEAD_BYTES:
            raise _too_large(self._limits)
        if self._received is not None:
            self._received(total)


async def _read_fields(
    reader: MultipartReader, limits: UploadLimits, speech_model: str, counted: _Counter
) -> AudioForm:
    fields: dict[str, list[str]] = {}
    data: bytes | None = None
    parts = 0
    while (part := await reader.next()) is not None:
        counted.check()
        parts += 1
        if parts > MAX_PARTS:
            raise Refused("bad-request", f"the form has more than {MAX_PARTS} parts")
        if not isinstance(part, BodyPartReader):
            raise Refused("bad-request", "nested multipart bodies are not taken")
        if part.name == "file":
            data = await _read_part(part, limits.max_bytes, _too_large(limits), counted)
        else:
            too_long = Refused("bad-request", f"the field {str(part.name)[:40]!r} is too long")
            raw = await _read_part(part, MAX_FIELD_BYTES, too_long, counted)
            fields.setdefault(str(part.name), []).append(raw.decode("utf-8", "replace"))
    counted.check()
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
    return AudioForm(
        data,
        model,
        language,
        one("prompt") or None,
        response_format,
        granularities,
        stream == "true",
        float(temperature or 0),
    )


async def _read_part(part: BodyPartReader, limit: int, over: Refused, counted: _Counter) -> bytes:
    kept, size = io.BytesIO(), 0  # its value is its buffer: the file is held once, not twice
    while chunk := await part.read_chunk(256 * 1024):
        size += len(chunk)
        if size > limit:
            raise over
        counted.check()
        kept.write(chunk)
    return kept.getvalue()


def _too_large(limits: UploadLimits) -> Refused:
    return Refused("file-too-large", f"the file is over {limits.max_bytes / 2**20:g} MB")


def _fraction(text: str) -> bool:
    try:
        return 0.0 <= float(text) <= 1.0
    except ValueError:
        return False
