"""What a skill sees of the grant a call runs under: plain terms, with no policy in them (the
policy that fills them in lives in the wallet shim, above the skills)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class GrantTerms:
    """The limits in force for one grant's calls (the stricter of the manifest's and the
    grant's), and the models the visitor ticked. A limit that neither states is None."""

    #: The longest a call may run, in seconds (the wallet's own limit, or a stricter one).
    max_call_seconds: float
    #: ``maxClipSeconds``: the longest clip a call may carry.
    max_clip_seconds: float | None = None
    #: ``maxTextChars``: the most text a call may carry, in code points.
    max_text_chars: int | None = None
    #: ``maxAnswerTokens``: the longest answer a call may ask for, in tokens.
    max_answer_tokens: int | None = None
    #: The models the visitor ticked, by code: ``m1`` → ``SOURCE/MODEL``.
    models: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", MappingProxyType(dict(self.models)))
