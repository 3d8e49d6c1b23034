"""Why a recording is refused: one exception, a stable code and a one-line message."""

from __future__ import annotations

from byoa_skills.protocol.refusal import Refusal

#: Every code a :class:`RecordingError` carries, with what it means. Stable: callers match on
#: them (docs/openai.md lists them).
CODES: dict[str, str] = {
    "file-too-large": "the file is larger than the size limit",
    "audio-too-long": "the recording is longer than the duration limit",
    "audio-undecodable": "no decoder here reads the file as audio",
    "uploads-full": "as many uploads as the engine holds are already waiting for their turn",
}


class RecordingError(Refusal, ValueError):
    """A recording that cannot be taken: a code from :data:`CODES` and a one-line message."""

    def __init__(self, code: str, message: str) -> None:
        if code not in CODES:
            raise AssertionError(f"unknown recording code {code!r}")
        super().__init__(code, message)
