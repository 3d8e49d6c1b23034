"""``GET /v1/models``: the speech model (under its name and ``whisper-1``), then each text
source's models."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from byoa_skills.serve.openai_api.door import DOOR
from byoa_skills.serve.openai_api.form import WHISPER_ALIAS
from byoa_skills.skills import SkillEngine

#: How long one text source may take to list its models, in seconds.
MODEL_LIST_SECONDS = 2.0


async def models(request: web.Request) -> web.Response:
    """The speech model (under its name and ``whisper-1``), then each text source's models
    as ``SOURCE/MODEL``, the name a grant's model codes give them; a source that does not
    answer within :data:`MODEL_LIST_SECONDS` is left out."""
    door = request.app[DOOR]
    ids: list[tuple[str, str]] = []
    if door.recordings is not None:
        ids += [(WHISPER_ALIAS, "byoa-skills"), (door.recordings.model_name, "byoa-skills")]
    if door.engine.text is not None:
        ids += await _text_models(door.engine)
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
