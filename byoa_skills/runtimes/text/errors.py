"""The one exception of a text call that fails, and the codes it may carry."""

from __future__ import annotations

from byoa_skills.protocol.refusal import Refusal

#: Every code a :class:`TextFailure` can carry, with what it means. Stable: callers match on
#: them.
CODES: dict[str, str] = {
    "bad-messages": "input.messages is not a non-empty list of {role, content} strings",
    "unknown-role": "a message's role is not system, user or assistant",
    "text-too-long": "the messages hold more text than the engine takes",
    "bad-params": "a parameter has the wrong type or is out of its range",
    "max-tokens-over-limit": "params.maxTokens asks for more tokens than the engine allows",
    "model-required": "the call names no model and no default model is set",
    "unknown-source": "the model's source is not in the sources file",
    "unknown-model": "the source does not list the model",
    "source-down": "the source cannot be reached",
    "upstream-refused": "the source refused the request (HTTP 4xx)",
    "upstream-failed": "the source failed (HTTP 5xx)",
    "upstream-malformed": "the source's answer does not follow its wire format",
    "upstream-error": "the source reported an error in the middle of its answer",
    "model-mismatch": "the source answered with another model than the one asked for",
    "deadline-exceeded": "no whole answer before the call's deadline",
}


class TextFailure(Refusal):
    """A text call that did not give an answer: a stable kebab-case ``code`` and a one-line
    ``message`` (never the messages' text)."""

    def __init__(self, code: str, message: str) -> None:
        if code not in CODES:
            raise AssertionError(f"unknown text failure code {code!r}")
        super().__init__(code, message)
