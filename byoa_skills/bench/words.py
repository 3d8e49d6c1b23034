"""Words of an answer against its reference: the normalized words, and whether an answer says
a phrase twice in a row where the reference does not (a doubled answer such as "Norway
Norway" for "Norway")."""

# ruff: noqa: RUF002  (a Russian example in a docstring is Cyrillic on purpose)
from __future__ import annotations

from byoa_skills.runtimes.speech.phrases import normalized_words, repeated_phrases


def most_in_a_row(words: list[str], phrase: tuple[str, ...]) -> int:
    """The most times ``phrase`` (at least one word) occurs back to back in ``words``; 0 when it
    does not occur."""
    k, best = len(phrase), 0
    for start in range(len(words) - k + 1):
        count = 0
        while tuple(words[start + count * k : start + (count + 1) * k]) == phrase:
            count += 1
        best = max(best, count)
    return best


def doubled(reference: str, answer: str) -> bool:
    """Whether ``answer`` says some phrase of one or more words more times in a row than
    ``reference`` does, and at least twice: "Mexico Mexico" for "Mexico", "10 of clubs 10 of
    clubs" for "ten of clubs", "Ха-ха-ха" for "Ха". Words are compared as
    :func:`normalized_words` gives them, so case and punctuation do not matter; a repetition
    the reference itself holds ("ha ha" for "ha ha") is not doubled, one more is ("ha ha ha")."""
    ref, said = normalized_words(reference), normalized_words(answer)
    return any(most_in_a_row(said, p) > most_in_a_row(ref, p) for p in repeated_phrases(said))
