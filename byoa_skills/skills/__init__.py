"""The skills: each one's module declares what it takes, measures, costs and refuses
(:class:`~byoa_skills.skills.base.Skill`); :mod:`.registry` lists them; :class:`SkillEngine`
answers calls through them."""

from byoa_skills.skills.audio_transcribe import AudioTranscribe
from byoa_skills.skills.base import (
    LOCAL_RECEIPT,
    MAX_DEADLINE_SECONDS,
    CallResult,
    PreparedCall,
    Runtimes,
    Skill,
)
from byoa_skills.skills.call_gate import Admitted, CallGate
from byoa_skills.skills.engine import CallHook, SkillEngine
from byoa_skills.skills.registry import KNOWN_SKILLS, SKILLS, http_status
from byoa_skills.skills.terms import GrantTerms
from byoa_skills.skills.text_generate import TextGenerate

__all__ = [
    "KNOWN_SKILLS",
    "LOCAL_RECEIPT",
    "MAX_DEADLINE_SECONDS",
    "SKILLS",
    "Admitted",
    "AudioTranscribe",
    "CallGate",
    "CallHook",
    "CallResult",
    "GrantTerms",
    "PreparedCall",
    "Runtimes",
    "Skill",
    "SkillEngine",
    "TextGenerate",
    "http_status",
]
