"""The purpose judge: the visitor's own model checks that a ``text.generate`` call under a
grant fits the purpose the site stated in its manifest.

The seam for the call pipeline (see ``docs/judge.md``)::

    result = check_call(...)                       # the reference gate, as now
    if result["decision"] != "blocked":
        call = judge.beside(grant.id, Purpose.of(grant.manifest, grant.origin), messages,
                            lambda on_chunk: runtime.generate(text_call, on_chunk), sink)
        try:
            merged = merge(result, await call.opinion())   # only ever stricter
            if merged["decision"] in ("allowed", "warn") or (
                merged["decision"] == "ask" and await ask_the_visitor(merged)
            ):
                answer = await call.release()      # held chunks first, then the answer
            else:
                await call.discard()               # nothing reaches the site: ok: false
        finally:
            await call.close()

:class:`PurposeJudge` holds the settings, the text runtime, the cache, a paid judge's daily
spend and the bound on judged calls in flight per site; :class:`UnavailableJudge` is the
judge of a site it is on for while its source does not answer (every call ``ask``);
:func:`judge` is one uncached judgement; :func:`merge` is the reference ``apply_opinion``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from byoa_skills.judge.answer import read_answer
from byoa_skills.judge.beside import BesideCall, Generation, HeldChunks, start_beside
from byoa_skills.judge.cache import CACHE_SIZE, OpinionCache, cache_key
from byoa_skills.judge.opinion import CODES, MODEL_CODES, Opinion, failed, merge
from byoa_skills.judge.prompt import (
    MESSAGE_BUDGET,
    Cut,
    Purpose,
    build_prompt,
    cut_messages,
    data_json,
    too_long,
)
from byoa_skills.judge.runner import (
    DEADLINE_SECONDS,
    MAX_TOKENS,
    JudgeSettings,
    can_judge,
    judge,
    unavailable,
)
from byoa_skills.judge.slots import IN_FLIGHT_PER_SITE, NoSlot, SiteSlots
from byoa_skills.judge.spend import DailySpend, MemoryLedger, Reservation, SpendLedger
from byoa_skills.runtimes.text import ChunkHook, TextRuntime


class PurposeJudge:
    """The wallet's judge: one text runtime, one setting, one cache of opinions; ``spend``
    the daily limit of a paid judge (None: a local one, not limited); ``slots`` the bound on
    each site's judged calls in flight (shared by the judges of one wallet)."""

    def __init__(
        self,
        runtime: TextRuntime,
        settings: JudgeSettings,
        cache: OpinionCache | None = None,
        spend: DailySpend | None = None,
        slots: SiteSlots | None = None,
    ) -> None:
        self.runtime = runtime
        self.settings = settings
        self.cache = cache if cache is not None else OpinionCache()
        self.spend = spend
        self.slots = slots if slots is not None else SiteSlots()

    async def opinion(
        self, grant_id: str, purpose: Purpose, messages: Sequence[Mapping[str, Any]]
    ) -> Opinion:
        """The opinion of ``messages`` under the grant ``grant_id``: from the cache when the
        same messages were judged under that grant by the same model with the same settings,
        else from the model (never raises; ``ask`` when the judge cannot judge, and
        ``purpose-judge-spent`` once a paid judge reached today's limit)."""
        key = cache_key(
            grant_id, self.settings.model, messages, data_json(purpose.data()), self.settings.key()
        )
        return await self.cache.judged(key, lambda: self._ask_model(purpose, messages))

    async def _ask_model(self, purpose: Purpose, messages: Sequence[Mapping[str, Any]]) -> Opinion:
        """One judgement by the model; a paid one only within the visitor's daily spend."""
        if self.spend is None:
            return await judge(purpose, messages, runtime=self.runtime, settings=self.settings)
        reservation = await self.spend.begin(await self._estimate(purpose, messages))
        if reservation is None:
            return failed("purpose-judge-spent", "the purpose judge reached today's spend")
        cost = Decimal(0)
        try:
            opinion = await judge(purpose, messages, runtime=self.runtime, settings=self.settings)
            cost = opinion.cost
            return opinion
        finally:
            self.spend.end(reservation, cost)

    async def _estimate(self, purpose: Purpose, messages: Sequence[Mapping[str, Any]]) -> Decimal:
        """The worst-case cost of one judgement at the source's listed prices (0: unknown)."""
        s = self.settings
        prompt = build_prompt(purpose, messages, s.budget, s.system_role, s.design)
        chars = sum(len(m["content"]) for m in prompt)
        try:
            _, usd = await self.runtime.estimate(s.model, chars, s.max_tokens, 1)
        except Exception:  # a price is a bound, never a reason to fail: unknown
            return Decimal(0)
        return usd

    def beside(
        self,
        grant_id: str,
        purpose: Purpose,
        messages: Sequence[Mapping[str, Any]],
        generation: Generation[Any],
        sink: ChunkHook | None = None,
        judge_first: bool = False,
    ) -> BesideCall[Any]:
        """Start ``generation`` and this call's judgement together (``judge_first``: the
        judgement alone, the call once it passes); the call's chunks for ``sink`` and its
        answer are held until :meth:`BesideCall.release`."""
        judging = self.opinion(grant_id, purpose, messages)
        return start_beside(generation, judging, sink, judge_first)


class UnavailableJudge(PurposeJudge):
    """The judge of a site it is on for while no source answers for its model: it fails
    closed, every call ``ask`` with ``purpose-judge-unavailable`` (never run unjudged)."""

    async def opinion(
        self, grant_id: str, purpose: Purpose, messages: Sequence[Mapping[str, Any]]
    ) -> Opinion:
        """``purpose-judge-unavailable``, ``ask``: no model is asked."""
        return unavailable()


__all__ = [
    "CACHE_SIZE",
    "CODES",
    "DEADLINE_SECONDS",
    "IN_FLIGHT_PER_SITE",
    "MAX_TOKENS",
    "MESSAGE_BUDGET",
    "MODEL_CODES",
    "BesideCall",
    "Cut",
    "DailySpend",
    "Generation",
    "HeldChunks",
    "JudgeSettings",
    "MemoryLedger",
    "NoSlot",
    "Opinion",
    "OpinionCache",
    "Purpose",
    "PurposeJudge",
    "Reservation",
    "SiteSlots",
    "SpendLedger",
    "UnavailableJudge",
    "build_prompt",
    "cache_key",
    "can_judge",
    "cut_messages",
    "failed",
    "judge",
    "merge",
    "read_answer",
    "start_beside",
    "too_long",
    "unavailable",
]
