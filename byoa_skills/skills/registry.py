"""Every skill the engine answers: adding a skill is one module and one line here."""

from __future__ import annotations

from byoa_skills.protocol.codes import GATE_STATUS, HTTP_STATUS, status_of
from byoa_skills.skills.audio_transcribe import AudioTranscribe
from byoa_skills.skills.base import CallResult, Skill
from byoa_skills.skills.text_generate import TextGenerate

#: The skills, by name, in the order the wallet 0.1 lists them.
SKILLS: dict[str, Skill] = {skill.name: skill for skill in (AudioTranscribe(), TextGenerate())}
#: Their names.
KNOWN_SKILLS: tuple[str, ...] = tuple(SKILLS)


def uses_models(name: str) -> bool:
    """Whether the skill ``name`` takes a grant's ``models`` block (:attr:`Skill.uses_models`);
    False for a skill the engine does not know."""
    skill = SKILLS.get(name)
    return skill is not None and skill.uses_models


def models_skills() -> tuple[str, ...]:
    """The skills whose manifest entry may carry a ``models`` block."""
    return tuple(name for name, skill in SKILLS.items() if skill.uses_models)


def judged(name: str) -> bool:
    """Whether the calls of the skill ``name`` under a grant run beside the purpose judge
    (:attr:`Skill.judged`); False for a skill the engine does not know."""
    skill = SKILLS.get(name)
    return skill is not None and skill.judged


def http_status(result: CallResult) -> int:
    """The local API's HTTP status for a call's answer: 200, the status its code has in the
    one table (:data:`~byoa_skills.protocol.codes.HTTP_STATUS`), 403 for a refusal the grant
    decided whose code has none there, 400 for bad input."""
    if result.ok:
        return 200
    code = str(result.code)
    if result.decision in ("blocked", "ask") and code not in HTTP_STATUS:
        return GATE_STATUS
    return status_of(code)
