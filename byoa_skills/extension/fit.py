"""Which of a manifest's skills this engine can serve now: the site guide's "no fitting
model" is a required skill that none of them can."""

from __future__ import annotations

import asyncio
from typing import Any

from byoa_skills.models.catalog import supports_language
from byoa_skills.models.errors import ModelError
from byoa_skills.runtimes.text import TextFailure
from byoa_skills.skills import SkillEngine

#: How long the text sources are given to list their models, in seconds, all together.
SOURCE_CHECK_SECONDS = 5.0


async def fitting_skills(engine: SkillEngine, manifest: dict[str, Any]) -> set[str]:
    """The skills of ``manifest`` that ``engine`` can answer: ``audio.transcribe`` when a
    pool runs a model that knows one of the languages asked for (any, when none are named);
    ``text.generate`` when some text source answers with at least one model."""
    skills = manifest.get("skills") if isinstance(manifest.get("skills"), dict) else {}
    fit = set()
    if "audio.transcribe" in skills and _speech_fits(engine, skills["audio.transcribe"]):
        fit.add("audio.transcribe")
    if "text.generate" in skills and await _text_fits(engine):
        fit.add("text.generate")
    return fit


def _speech_fits(engine: SkillEngine, entry: Any) -> bool:
    pool = engine.pool
    if pool is None or not pool.available:
        return False
    languages = entry.get("languages") if isinstance(entry, dict) else None
    if not isinstance(languages, list) or not languages:
        return True
    try:
        return any(
            isinstance(code, str) and supports_language(pool.config.model_name, code)
            for code in languages
        )
    except ModelError:  # a model outside the catalog: the workers know their own languages
        return True


async def _text_fits(engine: SkillEngine) -> bool:
    text = engine.text
    if text is None:
        return False
    try:
        sources = list(text.config().sources.values())
    except TextFailure:
        return False

    async def offers(source: Any) -> bool:
        try:
            return bool(await text.list_models(source))
        except TextFailure:
            return False

    try:
        answers = await asyncio.wait_for(
            asyncio.gather(*(offers(source) for source in sources)), SOURCE_CHECK_SECONDS
        )
    except asyncio.TimeoutError:
        return False
    return any(answers)
