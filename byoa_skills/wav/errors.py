"""The one exception every rejection of audio input raises, and the codes it may carry."""

from __future__ import annotations

from byoa_skills.protocol.refusal import Refusal

#: Every code a :class:`WavError` can carry, with what it means. Stable: callers match on them.
CODES: dict[str, str] = {
    "bad-input": "the skill input is not {audio: {mime, base64}} with string fields",
    "wrong-mime": "the audio's mime type is not audio/wav",
    "too-large": "the base64 text or file is larger than any clip within the limit can be",
    "bad-base64": "the text is not canonical standard base64 with padding",
    "not-riff": "the bytes do not start with a little-endian RIFF header",
    "not-wave": "the RIFF form type is not WAVE",
    "truncated": "a header or chunk ends before its stated size, or the RIFF size is larger "
    "than the bytes present",
    "trailing-bytes": "there are bytes after the end the RIFF size states",
    "duplicate-chunk": "more than one fmt or data chunk",
    "missing-fmt": "no fmt chunk",
    "bad-fmt": "the fmt chunk has a size or extension block that does not fit its format",
    "not-pcm": "the format is not integer PCM (plain, or WAVE_FORMAT_EXTENSIBLE with the PCM "
    "sub-format)",
    "not-mono": "more than one channel (or a channel mask naming more than one speaker)",
    "wrong-rate": "the sample rate is not 16000 Hz",
    "wrong-bits": "the samples are not 16-bit (or, extensible, not 16 valid bits)",
    "bad-block-align": "the block align is not 2 bytes",
    "bad-byte-rate": "the byte rate is not 32000 bytes per second",
    "missing-data": "no data chunk",
    "data-before-fmt": "the data chunk comes before the fmt chunk (RIFF WAVE requires fmt first)",
    "partial-frame": "the data chunk's size is not a whole number of 2-byte frames",
    "empty": "the data chunk holds no frames",
    "too-long": "the clip lasts longer than the limit",
}


class WavError(Refusal, ValueError):
    """A refused audio input: a stable kebab-case ``code`` and a one-line ``message``.

    It is the only exception the parsers raise for bad input, whatever the bytes.
    """

    def __init__(self, code: str, message: str) -> None:
        if code not in CODES:
            raise AssertionError(f"unknown wav error code {code!r}")
        super().__init__(code, message)
