"""The one exception a backend raises for a call it refuses, and the codes it may carry."""

from __future__ import annotations

from byoa_skills.protocol.refusal import Refusal

#: Every code a :class:`RuntimeRefusal` can carry, with what it means. Stable: callers match
#: on them.
CODES: dict[str, str] = {
    "unsupported-language": "the model cannot transcribe the language asked for, or the "
    "code names no language it knows",
    "bad-samples": "the samples are not a 1-D float32 array of finite values",
    "unsupported-option": "the backend cannot decode as asked (timestamps, a prompt or a "
    "translation with the torch backend; a translation with an English-only model)",
}


class RuntimeRefusal(Refusal, ValueError):
    """A refused transcription call: a stable kebab-case ``code`` and a one-line ``message``.

    Raised before any inference runs; the backend stays usable for the next call.
    """

    def __init__(self, code: str, message: str) -> None:
        if code not in CODES:
            raise AssertionError(f"unknown runtime refusal code {code!r}")
        super().__init__(code, message)
