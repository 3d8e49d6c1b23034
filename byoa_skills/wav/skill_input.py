"""From the input object of ``audio.transcribe`` to a :class:`Clip`."""

from __future__ import annotations

from typing import Any

from byoa_skills.wav.clip import MAX_CLIP_SECONDS, Clip
from byoa_skills.wav.errors import WavError
from byoa_skills.wav.parse import max_frames, parse_wav
from byoa_skills.wav.strict_base64 import decode_strict, encoded_length

#: The only mime type the skill takes (compared without regard to letter case).
WAV_MIME = "audio/wav"
#: Room for chunks besides ``fmt `` and ``data`` (LIST, fact...) in the largest accepted input.
METADATA_ALLOWANCE = 64 * 1024
_PLAIN_HEADER_BYTES = 44


def max_wav_bytes(max_seconds: float = MAX_CLIP_SECONDS) -> int:
    """The largest WAV file accepted from a site for a clip of at most ``max_seconds``."""
    return _PLAIN_HEADER_BYTES + 2 * max_frames(max_seconds) + METADATA_ALLOWANCE


def max_base64_length(max_seconds: float = MAX_CLIP_SECONDS) -> int:
    """The longest base64 text accepted: that of a :func:`max_wav_bytes` file."""
    return encoded_length(max_wav_bytes(max_seconds))


def clip_from_skill_input(skill_input: Any, max_seconds: float = MAX_CLIP_SECONDS) -> Clip:
    """Check ``{"audio": {"mime": "audio/wav", "base64": "..."}}`` and parse its clip.

    The base64 text's length is checked before anything is decoded. Raises
    :class:`WavError` for any bad input, whatever its shape or types.
    """
    audio = skill_input.get("audio") if isinstance(skill_input, dict) else None
    if not isinstance(audio, dict):
        raise WavError("bad-input", "the input has no 'audio' object")
    mime, text = audio.get("mime"), audio.get("base64")
    if not isinstance(mime, str) or not isinstance(text, str):
        raise WavError("bad-input", "'audio' needs string fields 'mime' and 'base64'")
    if mime.lower() != WAV_MIME:
        raise WavError("wrong-mime", f"mime {mime[:40]!r} is not {WAV_MIME!r}")
    limit = max_base64_length(max_seconds)
    if len(text) > limit:
        raise WavError(
            "too-large",
            f"{len(text)} base64 characters, more than the {limit} a {max_seconds:g} s clip needs",
        )
    return parse_wav(decode_strict(text), max_seconds=max_seconds)
