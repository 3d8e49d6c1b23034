"""The judge's memory: the same messages under the same grant, judged by the same model with
the same settings, are judged once. A bounded LRU of opinions keyed by a SHA-256 of (grant
id, judge model, every setting that changes a decision, messages, purpose); the messages
themselves are never kept. Calls that arrive while the same
messages are being judged wait for that one judgement instead of asking the model again.

Only the model's opinions are kept (:data:`~byoa_skills.judge.opinion.MODEL_CODES`):
a judge that failed or timed out is asked again next time.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from byoa_skills.judge.opinion import MODEL_CODES, Opinion

#: Opinions kept by default.
CACHE_SIZE = 1024


def cache_key(
    grant_id: str,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    purpose: str = "",
    settings: str = "",
) -> str:
    """The hex SHA-256 of the grant id, the judge's model, the messages (roles and contents,
    in order), the purpose as the judge read it (so a grant whose manifest changed is judged
    again) and ``settings``, every other setting that changes a decision (the mismatch
    action, the prompt's form: :meth:`~byoa_skills.judge.runner.JudgeSettings.key`)."""
    body = [
        grant_id,
        model,
        settings,
        purpose,
        [[str(m.get("role", "")), str(m.get("content", ""))] for m in messages],
    ]
    encoded = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()


class OpinionCache:
    """At most ``size`` opinions, the least recently used forgotten first."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        self.size = size
        self._opinions: OrderedDict[str, Opinion] = OrderedDict()
        self._running: dict[str, asyncio.Task[Opinion]] = {}
        #: How many times a model was asked through :meth:`judged`.
        self.asked = 0

    def __len__(self) -> int:
        return len(self._opinions)

    def get(self, key: str) -> Opinion | None:
        """The opinion kept under ``key`` (now the most recently used), marked ``cached``."""
        opinion = self._opinions.get(key)
        if opinion is None:
            return None
        self._opinions.move_to_end(key)
        return replace(opinion, cached=True, cost=Decimal(0))

    def put(self, key: str, opinion: Opinion) -> None:
        """Keep ``opinion`` when it is a model's; forget the oldest beyond ``size``."""
        if opinion.code not in MODEL_CODES:
            return
        self._opinions[key] = replace(opinion, cached=False)
        self._opinions.move_to_end(key)
        while len(self._opinions) > self.size:
            self._opinions.popitem(last=False)

    def clear(self) -> None:
        """Forget every opinion (after the visitor changed how the judge runs, say)."""
        self._opinions.clear()

    async def judged(self, key: str, judging: Callable[[], Awaitable[Opinion]]) -> Opinion:
        """The kept opinion under ``key``, or the one ``judging()`` gives (kept when it is a
        model's). One ``judging()`` at a time per key: others wait for its opinion. A waiter
        that is cancelled leaves the judgement running for the others."""
        kept = self.get(key)
        if kept is not None:
            return kept
        running = self._running.get(key)
        if running is None:
            self.asked += 1
            running = asyncio.ensure_future(self._judge(key, judging))
            self._running[key] = running
            return await asyncio.shield(running)
        opinion = await asyncio.shield(running)
        return replace(opinion, cached=True, cost=Decimal(0))

    async def _judge(self, key: str, judging: Callable[[], Awaitable[Opinion]]) -> Opinion:
        try:
            opinion = await judging()
            self.put(key, opinion)
            return opinion
        finally:
            self._running.pop(key, None)
