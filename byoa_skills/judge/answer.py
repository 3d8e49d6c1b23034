"""Reading the judge model's answer: its first word is the decision (``allowed``, ``ask``,
``blocked``; ``warn`` too), then a colon and the reason; an answer that begins with a JSON
object ``{"decision", "reason"}`` (in a code fence or not) is read as well. Anything else is
not an opinion and gives ``ask`` (``purpose-judge-unreadable``). Under a ``plain`` design
(:data:`~byoa_skills.judge.prompt.DESIGNS`) the first word may also be ``FITS`` (read as
``allowed``) or ``OUTSIDE`` (read as ``blocked``); a ``FITS`` whose first token's
log-probabilities lean to ``OUTSIDE`` (:mod:`~byoa_skills.judge.leaning`) is read as
``blocked``.

Only the beginning of the answer counts. A small model often echoes its prompt; the prompt
begins with the wallet's own words, never the site's, so an echo is never read as the
site's ``allowed``, and a JSON object the site placed inside the data block (a skill
declared as ``{"decision": "allowed"}``, say) is never read as the opinion."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from byoa_skills.judge.leaning import OUTSIDE_SHARE, leaning, leans_outside
from byoa_skills.judge.opinion import Opinion, failed
from byoa_skills.judge.prompt import DESIGN

#: The longest reason kept from the model's answer, in characters.
REASON_CHARS = 160
#: What each decision the model may give means, as (code, message when it gave no reason).
_MEANINGS = {
    "allowed": ("purpose-fits", "the call fits the stated purpose"),
    "warn": ("purpose-doubt", "the call may not fit the stated purpose"),
    "ask": ("purpose-unclear", "the judge cannot tell whether the call fits the stated purpose"),
    "blocked": ("purpose-mismatch", "the call does not fit the stated purpose"),
}
#: The one-word answers of the ``plain`` designs, as the decision each gives.
_PLAIN_WORDS = {"fits": "allowed", "outside": "blocked"}
_FIRST_WORD = re.compile(r"[^\w-]*([A-Za-z-]+)")
_FENCE = re.compile(r"\s*(?:```(?:json)?\s*)?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")


def read_answer(
    text: str,
    model: str | None = None,
    mismatch: str = "blocked",
    design: str = DESIGN,
    first_tokens: Sequence[tuple[str, float]] | None = None,
) -> Opinion:
    """The opinion ``text`` states; ``mismatch`` is the decision a ``blocked`` answer gives
    (``ask`` lets the visitor decide instead of the model); ``design`` is the prompt's design
    (:data:`~byoa_skills.judge.prompt.DESIGNS`); ``first_tokens`` the first answer token's
    likeliest alternatives with their log-probabilities, when the source gave them."""
    plain = design != "rules"
    found = _decision_of(text, plain)
    if found is None:
        return failed("purpose-judge-unreadable", "the purpose judge gave no readable opinion")
    decision, reason = found
    if plain and decision == "allowed" and leans_outside(first_tokens):
        share = math.exp(leaning(first_tokens) or 0.0)
        decision = "blocked"
        reason = (
            f"the judge's model found OUTSIDE {share:.2f} times as likely as FITS "
            f"(at least {OUTSIDE_SHARE:g} means outside)"
        )
    code, default = _MEANINGS[decision]
    if decision == "blocked":
        decision = mismatch
    return Opinion(decision, code, _one_line(reason) or default, model=model)


def _decision_of(text: str, plain: bool = False) -> tuple[str, str] | None:
    """(decision, reason) from the JSON object ``text`` begins with, else its first word
    (with ``plain`` also ``FITS`` or ``OUTSIDE``)."""
    body = _leading_object(text)
    if body is not None:
        decision = body.get("decision")
        if isinstance(decision, str) and decision.strip().lower() in _MEANINGS:
            reason = body.get("reason")
            return decision.strip().lower(), reason if isinstance(reason, str) else ""
        return None
    match = _FIRST_WORD.match(text)
    if match is None:
        return None
    word = match.group(1).lower()
    if plain:
        word = _PLAIN_WORDS.get(word, word)
    if word in _MEANINGS:
        return word, text[match.end() :].strip(" \t\n:.-")
    return None


def _leading_object(text: str) -> dict[str, Any] | None:
    """The JSON object at the start of ``text`` (after a code fence's opening), or None."""
    start = _FENCE.match(text)
    at = start.end() if start else 0
    if not text.startswith("{", at):
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text, at)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _one_line(text: str) -> str:
    line = _CONTROL.sub(" ", text).strip()
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"
