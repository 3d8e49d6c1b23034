"""Asking the judge: the prompt goes to one of the visitor's text sources through the text
runtime (any OpenAI-compatible server, Ollama or OpenRouter), at temperature 0, with a small
answer bound and a deadline; the answer is read into an :class:`Opinion`.

:func:`judge` never raises for a judge that fails: a source that is down or errs gives
``purpose-judge-error``, one slower than the deadline ``purpose-judge-timeout``, an answer
that is no opinion ``purpose-judge-unreadable``, each with the decision ``ask``. A source
that cannot be reached (connection refused, its model not listed) gives
``purpose-judge-unavailable``; a call whose messages are longer than the judge's budget is
not sent to the model at all: ``purpose-judge-too-long``, ``ask``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from byoa_skills.judge.answer import read_answer
from byoa_skills.judge.leaning import TOP_LOGPROBS
from byoa_skills.judge.opinion import Opinion, failed
from byoa_skills.judge.prompt import (
    DESIGN,
    DESIGNS,
    MESSAGE_BUDGET,
    Purpose,
    build_prompt,
    too_long,
)
from byoa_skills.runtimes.text import TextAnswer, TextCall, TextFailure, TextRuntime
from byoa_skills.runtimes.text.ollama import canonical_model

log = logging.getLogger("byoa_skills.judge")

#: Seconds the judge is given by default; slower gives ``ask``.
DEADLINE_SECONDS = 10.0
#: The judge's answer bound, in tokens: one short line of JSON.
MAX_TOKENS = 32
#: The text runtime's failures that mean the judge's source does not answer.
UNAVAILABLE = frozenset({"source-down", "unknown-source", "unknown-model"})


@dataclass(frozen=True)
class JudgeSettings:
    """Which model judges and how: ``SOURCE/MODEL`` as the text runtime names it, the
    deadline in seconds, the answer bound, the messages' budget in characters, the decision
    the model's ``blocked`` gives (``blocked``, or ``ask`` to let the visitor decide every
    mismatch), whether the rules go in a system message (False: at the head of the user
    message, for a source whose chat template drops system messages), the prompt's design
    (one of :data:`~byoa_skills.judge.prompt.DESIGNS`), and whether a one-word design asks
    the source for the first token's log-probabilities and reads how far the model leans
    to ``OUTSIDE`` (:mod:`~byoa_skills.judge.leaning`)."""

    model: str
    deadline: float = DEADLINE_SECONDS
    max_tokens: int = MAX_TOKENS
    budget: int = MESSAGE_BUDGET
    mismatch: str = "blocked"
    system_role: bool = True
    design: str = DESIGN
    leaning: bool = True

    def __post_init__(self) -> None:
        if self.mismatch not in ("blocked", "ask"):
            raise ValueError("mismatch must be blocked or ask")
        if not self.deadline > 0 or self.max_tokens < 1 or self.budget < 100:
            raise ValueError("deadline > 0, max_tokens >= 1 and budget >= 100")
        if self.design not in DESIGNS:
            raise ValueError(f"design must be one of {', '.join(DESIGNS)}")

    def key(self) -> str:
        """Every setting besides the model that changes an opinion, for the cache's key."""
        return (
            f"mismatch={self.mismatch};budget={self.budget};system={self.system_role};"
            f"tokens={self.max_tokens};design={self.design};leaning={self.leaning}"
        )


async def judge(
    purpose: Purpose,
    messages: Sequence[Mapping[str, Any]],
    *,
    runtime: TextRuntime,
    settings: JudgeSettings,
) -> Opinion:
    """The judge's opinion of a call carrying ``messages`` under ``purpose``, from the model
    ``settings.model`` at one of ``runtime``'s sources; ``ask`` when it cannot judge in time.
    Cancelling the awaiting task cancels the upstream request."""
    if too_long(messages, settings.budget):
        return failed(
            "purpose-judge-too-long",
            f"the call is longer than the {settings.budget} characters the purpose judge reads",
        )
    call = TextCall(
        model=settings.model,
        messages=build_prompt(
            purpose, messages, settings.budget, settings.system_role, settings.design
        ),
        max_tokens=settings.max_tokens,
        temperature=0.0,
        deadline=settings.deadline,
        top_logprobs=TOP_LOGPROBS if settings.leaning and settings.design != "rules" else 0,
    )
    try:
        # the runtime keeps the deadline; this bound is for anything around it
        answer = await asyncio.wait_for(_generate(runtime, call), settings.deadline + 1.0)
    except TextFailure as failure:
        if failure.code == "deadline-exceeded":
            return _timed_out(settings)
        if failure.code in UNAVAILABLE:
            log.info("event=judge-unavailable code=%s", failure.code)
            return unavailable()
        log.info("event=judge-failed code=%s", failure.code)
        return failed("purpose-judge-error", f"the purpose judge failed: {failure.code}")
    except asyncio.TimeoutError:
        return _timed_out(settings)
    except Exception as error:  # the source is outside code: fail towards asking
        log.warning("event=judge-failed error=%r", type(error).__name__)
        return failed("purpose-judge-error", "the purpose judge failed")
    opinion = read_answer(
        answer.texts[0], answer.model, settings.mismatch, settings.design, answer.first_tokens
    )
    return Opinion(
        opinion.decision, opinion.code, opinion.message, model=answer.model, cost=answer.cost
    )


async def _generate(runtime: TextRuntime, call: TextCall) -> TextAnswer:
    """The source's answer to ``call``; a source that refuses a request asking for
    log-probabilities is asked once more without them, within the same deadline."""
    began = time.monotonic()
    try:
        return await runtime.generate(call)
    except TextFailure as failure:
        if failure.code != "upstream-refused" or not call.top_logprobs:
            raise
    left = call.deadline - (time.monotonic() - began)
    if left <= 0:
        raise TextFailure("deadline-exceeded", f"no whole answer within {call.deadline:g} s")
    return await runtime.generate(replace(call, top_logprobs=0, deadline=left))


async def can_judge(runtime: TextRuntime, model: str) -> bool:
    """Whether the source of ``model`` answers and lists it now (the judge is off, and the
    wallet page says so, when it does not)."""
    try:
        source, model_id = runtime.resolve(model)
        models = await asyncio.wait_for(runtime.list_models(source, fresh=True), 5.0)
    except (TextFailure, asyncio.TimeoutError):
        return False
    if source.kind == "ollama":
        return canonical_model(model_id) in {canonical_model(info.id) for info in models}
    return any(info.id == model_id for info in models)


def unavailable() -> Opinion:
    """The opinion of a judge that is on but whose source does not answer: ``ask``."""
    return failed("purpose-judge-unavailable", "the purpose judge's source does not answer")


def _timed_out(settings: JudgeSettings) -> Opinion:
    return failed(
        "purpose-judge-timeout", f"the purpose judge gave no opinion within {settings.deadline:g} s"
    )
