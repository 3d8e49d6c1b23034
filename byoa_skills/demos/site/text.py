"""The text mode: one question to each model code the wallet granted, and the grant as the
wallet last told it, for the page.

A question goes to every code of the grant's ``models`` (m1, m2…) as one ``text.generate``
call each, at most ``maxParallelCalls`` at a time; a code whose call is refused, fails or
takes too long has no answer (``text: null``). While the grant says ``paused`` nothing is
sent, and every code has no answer.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

from byoa_skills.demos.site.demo import SiteDemo

TEXT_SKILL = "text.generate"
#: What the page asks for when it says nothing else.
DEFAULT_MAX_TOKENS = 64
#: The refusals of ``POST /byoa/ask``: code → the one line the page is told.
ASK_CODES: dict[str, str] = {
    "not-json": "send the question as application/json",
    "body-invalid": "the body must be a JSON object",
    "question-invalid": "the question must be text that is not empty",
    "question-too-long": "the question is longer than this site's maxTextChars",
    "max-tokens-invalid": "maxTokens must be a whole number from 1 to this site's maxAnswerTokens",
    "stream-invalid": "stream must be true or false",
}

SessionState = Literal["none", "connected", "away", "ended"]


class AskRefused(ValueError):
    """A question the site does not send: a code of :data:`ASK_CODES` and its line."""

    def __init__(self, code: str) -> None:
        super().__init__(ASK_CODES[code])
        self.code = code
        self.message = ASK_CODES[code]


@dataclass(frozen=True)
class Question:
    """What the visitor asked and how: the text, the answer's length, streamed or not."""

    text: str
    max_tokens: int = DEFAULT_MAX_TOKENS
    stream: bool = False

    def params(self, code: str | None) -> dict[str, Any]:
        """The call's ``params`` for the model ``code`` (None: the grant names no models)."""
        params: dict[str, Any] = {} if code is None else {"model": code}
        params["maxTokens"] = self.max_tokens
        if self.stream:
            params["stream"] = True
        return params


def purpose_limit(manifest: dict[str, Any], name: str) -> int | None:
    """The manifest's ``purpose.limits[name]`` when it is a whole number, else None."""
    purpose = manifest.get("purpose")
    limits = purpose.get("limits") if isinstance(purpose, dict) else None
    value = limits.get(name) if isinstance(limits, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_question(body: Any, manifest: dict[str, Any]) -> Question:
    """The question a page's JSON body asks, within the manifest's own limits
    (``maxTextChars``, ``maxAnswerTokens``). Raises :class:`AskRefused`."""
    if not isinstance(body, dict):
        raise AskRefused("body-invalid")
    text = body.get("question")
    if not isinstance(text, str) or not text.strip():
        raise AskRefused("question-invalid")
    most_chars = purpose_limit(manifest, "maxTextChars")
    if most_chars is not None and len(text) > most_chars:
        raise AskRefused("question-too-long")
    max_tokens = body.get("maxTokens", DEFAULT_MAX_TOKENS)
    most_tokens = purpose_limit(manifest, "maxAnswerTokens")
    if (
        not isinstance(max_tokens, int)
        or isinstance(max_tokens, bool)
        or max_tokens < 1
        or (most_tokens is not None and max_tokens > most_tokens)
    ):
        raise AskRefused("max-tokens-invalid")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise AskRefused("stream-invalid")
    return Question(text, max_tokens, stream)


def granted_codes(grant: dict[str, Any]) -> list[str | None]:
    """The model codes a question goes to: the grant's ``models`` (m1, m2…); ``[None]`` (one
    call naming no model) when the grant lists none; ``[]`` when it lacks text.generate."""
    skills = grant.get("skills")
    if not isinstance(skills, list) or TEXT_SKILL not in skills:
        return []
    models = grant.get("models")
    if not isinstance(models, list) or not models:
        return [None]
    return list(dict.fromkeys(code for code in models if isinstance(code, str)))


async def ask_every_model(demo: SiteDemo, session: str, question: Question) -> list[dict[str, Any]]:
    """Ask each granted code on the wallet connected with ``session``: one
    ``{"model", "text", "pieces"}`` per code in the grant's order (``text`` None for no
    answer, ``pieces`` the chunk frames that came); ``[]`` when no wallet is connected."""
    connection = demo.connection(session)
    if connection is None:
        return []
    codes = granted_codes(connection.grant)
    if connection.grant.get("paused") is True:
        return [{"model": code, "text": None, "pieces": 0} for code in codes]
    answers: list[dict[str, Any]] = []
    step = connection.max_parallel_calls
    for start in range(0, len(codes), step):
        group = codes[start : start + step]
        done = await asyncio.gather(
            *(demo.generate(session, question.text, question.params(code)) for code in group)
        )
        answers += [
            {"model": code, "text": text, "pieces": pieces}
            for code, (text, pieces) in zip(group, done, strict=True)
        ]
    return answers


def session_view(demo: SiteDemo, session: str) -> dict[str, Any]:
    """What the page shows of the wallet that came with ``session``: ``state`` (``none``: no
    wallet came; ``connected``; ``away``: its socket closed without a bye, it may come back
    with its pairing; ``ended``: it said bye, the grant ended) and ``grant``, as the wallet
    last told it (None when none came or it ended)."""
    latest = demo.latest_connection(session)
    live = demo.connection(session)
    if live is not None:
        state: SessionState = "connected"
        latest = live
    elif latest is None:
        state = "none"
    elif latest.said_bye:
        state = "ended"
    else:
        state = "away"
    grant = latest.grant if latest is not None and state != "ended" else None
    return {"state": state, "grant": grant}
