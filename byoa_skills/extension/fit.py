"""Which of a manifest's skills this engine can serve now: the site guide's "no fitting
model" is a required skill that none of them can. Each skill says itself whether it fits
(:meth:`~byoa_skills.skills.base.Skill.fits`)."""

from __future__ import annotations

from typing import Any

from byoa_skills.skills import SkillEngine


async def fitting_skills(engine: SkillEngine, manifest: dict[str, Any]) -> set[str]:
    """The skills of ``manifest`` that ``engine`` knows and can answer now as each entry
    asks for it (for speech: a model that knows one of the languages asked for)."""
    skills = manifest.get("skills") if isinstance(manifest.get("skills"), dict) else {}
    return {name for name, entry in skills.items() if await engine.fits(name, entry)}
