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

:class:`PurposeJudge` holds the settings, the text runtime and the cache; :func:`judge` is
one uncached judgement; :func:`merge` is the reference ``apply_opinion``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
)
from byoa_skills.judge.runner import (
    DEADLINE_SECONDS,
    MAX_TOKENS,
    JudgeSettings,
    can_judge,
    judge,
)
from byoa_skills.runtimes.text import ChunkHook, TextRuntime


class PurposeJudge:
    """The wallet's judge: one text runtime, one setting, one cache of opinions."""

    def __init__(
        self,
        runtime: TextRuntime,
        settings: JudgeSettings,
        cache: OpinionCache | None = None,
    ) -> None:
        self.runtime = runtime
        self.settings = settings
        self.cache = cache if cache is not None else OpinionCache()

    async def opinion(
        self, grant_id: str, purpose: Purpose, messages: Sequence[Mapping[str, Any]]
    ) -> Opinion:
        """The opinion of ``messages`` under the grant ``grant_id``: from the cache when the
        same messages were judged under that grant by the same model, else from the model
        (never raises; ``ask`` when the judge cannot judge)."""
        key = cache_key(grant_id, self.settings.model, messages, data_json(purpose.data()))
        return await self.cache.judged(
            key,
            lambda: judge(purpose, messages, runtime=self.runtime, settings=self.settings),
        )

    def beside(
        self,
        grant_id: str,
        purpose: Purpose,
        messages: Sequence[Mapping[str, Any]],
        generation: Generation[Any],
        sink: ChunkHook | None = None,
    ) -> BesideCall[Any]:
        """Start ``generation`` and this call's judgement together; the call's chunks for
        ``sink`` and its answer are held until :meth:`BesideCall.release`."""
        return start_beside(generation, self.opinion(grant_id, purpose, messages), sink)


__all__ = [
    "CACHE_SIZE",
    "CODES",
    "DEADLINE_SECONDS",
    "MAX_TOKENS",
    "MESSAGE_BUDGET",
    "MODEL_CODES",
    "BesideCall",
    "Cut",
    "Generation",
    "HeldChunks",
    "JudgeSettings",
    "Opinion",
    "OpinionCache",
    "Purpose",
    "PurposeJudge",
    "build_prompt",
    "cache_key",
    "can_judge",
    "cut_messages",
    "failed",
    "judge",
    "merge",
    "read_answer",
    "start_beside",
]
