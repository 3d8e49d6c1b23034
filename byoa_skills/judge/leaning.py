"""How far the judge's model leans to ``OUTSIDE``, read from its first answer token's
log-probabilities, where the source gives them.

A small model answers ``FITS`` to many calls it holds nearly as likely to be ``OUTSIDE``:
read as a bare word, its answer lets them through. Under the one-word designs the judge asks
the source for the first token's likeliest alternatives (OpenAI's ``logprobs`` and
``top_logprobs``: llama.cpp's server, vLLM, OpenRouter's models that give them) and calls
a ``FITS`` answer ``blocked`` when the model gave ``OUTSIDE`` at least :data:`OUTSIDE_SHARE`
of the probability it gave ``FITS``. The share was chosen on the ``tune`` part of the
labelled calls (tests/data/judge/, docs/judge.md); a source that gives no log-probabilities
is read by its word alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: ``FITS`` is read as ``blocked`` when P(OUTSIDE) is at least this share of P(FITS).
OUTSIDE_SHARE = 0.5
#: How many likeliest first tokens the judge asks the source for.
TOP_LOGPROBS = 10


def leaning(first_tokens: Sequence[tuple[str, float]] | None) -> float | None:
    """log P(OUTSIDE) - log P(FITS) over the first tokens given (each word's probability is
    the sum over the tokens that begin it, as ``F``, ``FIT``, ``OUT``, ``OUTSIDE``, in any
    case and spacing); ``inf`` when only ``OUTSIDE`` is among them, ``-inf`` when only
    ``FITS``, None when neither is (nothing to read)."""
    if not first_tokens:
        return None
    fits = outside = 0.0
    for token, logprob in first_tokens:
        word = token.strip().upper()
        if not word:
            continue
        if "FITS".startswith(word) or word.startswith("FIT"):
            fits += math.exp(logprob)
        elif "OUTSIDE".startswith(word) or word.startswith("OUT"):
            outside += math.exp(logprob)
    if fits == 0 and outside == 0:
        return None
    if fits == 0:
        return math.inf
    if outside == 0:
        return -math.inf
    return math.log(outside) - math.log(fits)


def leans_outside(first_tokens: Sequence[tuple[str, float]] | None) -> bool:
    """Whether the model gave ``OUTSIDE`` at least :data:`OUTSIDE_SHARE` of the probability it
    gave ``FITS`` (False when the tokens say nothing of either)."""
    lean = leaning(first_tokens)
    return lean is not None and lean >= math.log(OUTSIDE_SHARE)
