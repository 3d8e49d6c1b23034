"""What the OpenAI routes share, kept on the application under one key: the skill engine,
the wallet shim (for Activity), the limits, and the recordings' service."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from byoa_skills.recordings import RecordingService
from byoa_skills.serve.openai_api.limits import UploadLimits
from byoa_skills.skills import SkillEngine
from byoa_skills.wallet_shim.shim import WalletShim


@dataclass(frozen=True)
class Door:
    """The OpenAI routes' engine, shim and limits, and the recordings' service (None when no
    speech runs here)."""

    engine: SkillEngine
    shim: WalletShim
    limits: UploadLimits
    recordings: RecordingService | None


DOOR = web.AppKey("openai_door", Door)
