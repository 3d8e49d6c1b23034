"""The words of a transcript and the phrases it says twice in a row, one reading for the
short-window guard (``whisper_ct2.looks_degenerate``) and the bench's doubled-answer count
(``bench/words.py``)."""

# ruff: noqa: RUF002  (a Russian example in a docstring is Cyrillic on purpose)
from __future__ import annotations

import re
import unicodedata

_WORD = re.compile(r"\w+")


def normalized_words(text: str) -> list[str]:
    """The words of ``text``: runs of letters and digits, case-folded (NFC first, so a letter
    with an accent is one letter however it was written); punctuation, hyphens and
    apostrophes separate words and are dropped ("Ха-ха-ха" is three words)."""
    return _WORD.findall(unicodedata.normalize("NFC", text).casefold())


def repeated_phrases(words: list[str]) -> list[tuple[str, ...]]:
    """Each phrase that ``words`` says twice in a row (``words[i:i+k] == words[i+k:i+2k]``
    for some ``i`` and ``k >= 1``), shortest first, each phrase once, in the order found."""
    found: list[tuple[str, ...]] = []
    for k in range(1, len(words) // 2 + 1):
        for i in range(len(words) - 2 * k + 1):
            phrase = tuple(words[i : i + k])
            if phrase == tuple(words[i + k : i + 2 * k]) and phrase not in found:
                found.append(phrase)
    return found


def says_a_phrase_twice(text: str) -> bool:
    """Whether ``text`` holds a phrase of one or more words said twice in a row ("Norway
    Norway", "7 of clubs 7 of clubs"; words as :func:`normalized_words` reads them): how a
    short window doubles a short answer."""
    return bool(repeated_phrases(normalized_words(text)))
