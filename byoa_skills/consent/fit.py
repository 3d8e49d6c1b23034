"""Which of a manifest's skills this engine can serve now: the site guide's "no fitting
model" is a required skill that none of them can (for ``text.generate``: no text source
answers with a model). Each skill says itself whether it fits
(:meth:`~byoa_skills.skills.base.Skill.fits`)."""

from __future__ import annotations

from typing import Any

from byoa_skills.skills import SkillEngine


async def fitting_skills(engine: SkillEngine, manifest: dict[str, Any]) -> set[str]:
    """The skills of ``manifest`` that ``engine`` knows and can answer now as each entry
    asks for it (for speech: a model that knows one of the languages asked for)."""
    skills = manifest.get("skills") if isinstance(manifest.get("skills"), dict) else {}
    return {name for name, entry in skills.items() if await engine.fits(name, entry)}


def granted_skills(manifest: dict[str, Any], fit: set[str]) -> list[str] | None:
    """The manifest's skills an Allow gives, sorted: those in ``fit``; None (no fitting model:
    no consent) when a required one is not in ``fit`` or none is."""
    skills = manifest.get("skills")
    if not isinstance(skills, dict) or not skills:
        return None
    for name, entry in skills.items():
        if isinstance(entry, dict) and entry.get("required") is True and name not in fit:
            return None
    granted = sorted(name for name in skills if name in fit)
    return granted or None
