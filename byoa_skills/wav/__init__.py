"""Strict parsing and writing of the one audio format ``audio.transcribe`` takes.

A 16 kHz, mono, 16-bit PCM WAV of at most 15 s, as strict base64 in the skill input. This
package imports only numpy and the standard library, so that any component can use it.
"""

from byoa_skills.wav.clip import MAX_CLIP_SECONDS, SAMPLE_RATE, Clip
from byoa_skills.wav.errors import CODES, WavError
from byoa_skills.wav.parse import max_frames, parse_wav
from byoa_skills.wav.skill_input import (
    METADATA_ALLOWANCE,
    WAV_MIME,
    clip_from_skill_input,
    max_base64_length,
    max_wav_bytes,
)
from byoa_skills.wav.strict_base64 import decode_strict
from byoa_skills.wav.write import float_to_int16, wav_base64, wav_from_float, wav_from_int16

__all__ = [
    "CODES",
    "MAX_CLIP_SECONDS",
    "METADATA_ALLOWANCE",
    "SAMPLE_RATE",
    "WAV_MIME",
    "Clip",
    "WavError",
    "clip_from_skill_input",
    "decode_strict",
    "float_to_int16",
    "max_base64_length",
    "max_frames",
    "max_wav_bytes",
    "parse_wav",
    "wav_base64",
    "wav_from_float",
    "wav_from_int16",
]
