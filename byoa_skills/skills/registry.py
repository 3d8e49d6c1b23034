"""Every skill the engine answers: adding a skill is one module and one line here."""

from __future__ import annotations

from byoa_skills.protocol.codes import BAD_INPUT_STATUS, GATE_STATUS, HTTP_STATUS
from byoa_skills.skills.audio_transcribe import AudioTranscribe
from byoa_skills.skills.base import CallResult, Skill
from byoa_skills.skills.text_generate import TextGenerate

#: The skills, by name, in the order the wallet 0.1 lists them.
SKILLS: dict[str, Skill] = {skill.name: skill for skill in (AudioTranscribe(), TextGenerate())}
#: Their names.
KNOWN_SKILLS: tuple[str, ...] = tuple(SKILLS)

_STATUS_BY_CODE: dict[str, int] = {
    code: status for skill in SKILLS.values() for code, status in skill.statuses.items()
} | HTTP_STATUS


def http_status(result: CallResult) -> int:
    """The local API's HTTP status for a call's answer: 200, the status its code has, 403 for
    a refusal the grant decided, 400 for bad input."""
    if result.ok:
        return 200
    if result.decision in ("blocked", "ask") and result.code not in _STATUS_BY_CODE:
        return GATE_STATUS
    return _STATUS_BY_CODE.get(str(result.code), BAD_INPUT_STATUS)
