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
answer stitched back in order. These calls need no grant: Activity lists each one as the
local client's (``kind: "local"``), never with its audio or text; a translation is
``audio.transcribe`` with ``task: "translate"``, in Activity and the metrics alike.

One job a module: :mod:`.limits` (the limits and the environment that sets them),
:mod:`.form` (the form, read within them), :mod:`.formats` (the answer's formats),
:mod:`.streaming` (server-sent events), :mod:`.route` (the two audio routes),
:mod:`.models` (``/v1/models``), :mod:`.shape` (refusals in OpenAI's shape) and
:mod:`.door` (what they share).
"""

from __future__ import annotations

from aiohttp import web

from byoa_skills.recordings import RecordingService, UploadLine
from byoa_skills.serve.openai_api.door import DOOR, Door
from byoa_skills.serve.openai_api.form import (
    FORM_OVERHEAD_BYTES,
    MAX_FIELD_BYTES,
    MAX_PARTS,
    WHISPER_ALIAS,
    AudioForm,
    read_form,
)
from byoa_skills.serve.openai_api.formats import RESPONSE_FORMATS, answer, verbose_json
from byoa_skills.serve.openai_api.limits import (
    AT_ONCE_ENV,
    DEFAULT_MAX_UPLOAD_BYTES,
    DURATION_LIMIT_ENV,
    UPLOAD_LIMIT_ENV,
    WAITING_BYTES_ENV,
    WAITING_ENV,
    UploadLimits,
)
from byoa_skills.serve.openai_api.models import MODEL_LIST_SECONDS, models
from byoa_skills.serve.openai_api.route import transcriptions, translations
from byoa_skills.serve.openai_api.shape import Refused, error_body, in_openai_shape, refused
from byoa_skills.skills import SkillEngine
from byoa_skills.wallet_shim.shim import WalletShim

__all__ = [
    "AT_ONCE_ENV",
    "DEFAULT_MAX_UPLOAD_BYTES",
    "DOOR",
    "DURATION_LIMIT_ENV",
    "FORM_OVERHEAD_BYTES",
    "MAX_FIELD_BYTES",
    "MAX_PARTS",
    "MODEL_LIST_SECONDS",
    "RESPONSE_FORMATS",
    "UPLOAD_LIMIT_ENV",
    "WAITING_BYTES_ENV",
    "WAITING_ENV",
    "WHISPER_ALIAS",
    "AudioForm",
    "Door",
    "Refused",
    "UploadLimits",
    "add_openai_routes",
    "answer",
    "error_body",
    "read_form",
    "refused",
    "verbose_json",
]


def add_openai_routes(
    app: web.Application,
    engine: SkillEngine,
    shim: WalletShim,
    limits: UploadLimits | None = None,
) -> RecordingService | None:
    """Add the OpenAI-compatible routes to the local API ``app`` (limits from the
    environment when not given), and write every refusal on their paths in OpenAI's shape.
    Returns the recordings' service they use (None when no speech runs here)."""
    limits = limits or UploadLimits.from_env()
    pool = engine.pool
    recordings = None
    if pool is not None:
        line = UploadLine(limits.waiting, limits.waiting_bytes)
        recordings = RecordingService.on_pool(pool, limits.max_seconds, limits.at_once, line=line)
    app[DOOR] = Door(engine, shim, limits, recordings)
    app.router.add_post("/v1/audio/transcriptions", transcriptions)
    app.router.add_post("/v1/audio/translations", translations)
    app.router.add_get("/v1/models", models)
    app.on_response_prepare.append(in_openai_shape)
    return recordings
