"""The judge beside the call: the site's generation and the judge start together; the
answer, and every streamed chunk, is held until the judge's opinion lets it pass, and thrown
away when it does not. A call the judge allows costs the judge's time only where the judge is
slower than the answer.

``generation(on_chunk)`` is the call itself (for a text call, ``lambda on_chunk:
runtime.generate(call, on_chunk)``); ``on_chunk`` is None when the caller gave no sink, so a
call that does not stream is asked whole, as without the judge.

With ``judge_first`` the call waits for the judge instead: it starts only on
:meth:`BesideCall.release`, once the opinion let it pass, so a call to a source that costs
money is never paid for and then thrown away.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from byoa_skills.judge.opinion import Opinion, failed
from byoa_skills.runtimes.text import ChunkHook

T = TypeVar("T")
#: The call run beside the judge, given the hook its chunks go to (None: no streaming).
Generation = Callable[[ChunkHook | None], Awaitable[T]]


class HeldChunks:
    """Chunks kept back until :meth:`release`; after it they go to the sink as they come, in
    the order they came. After :meth:`discard` they are dropped."""

    def __init__(self, sink: ChunkHook) -> None:
        self._sink = sink
        self._held: list[tuple[int, str]] = []
        self._state = "held"  # held -> flushing -> open, or held -> discarded

    @property
    def held(self) -> int:
        """Chunks kept back now."""
        return len(self._held)

    async def take(self, choice: int, text: str) -> None:
        """The generation's chunk hook."""
        if self._state == "open":
            await self._sink(choice, text)
        elif self._state != "discarded":
            self._held.append((choice, text))

    async def release(self) -> None:
        """Send every held chunk to the sink, then let the next ones through."""
        if self._state != "held":
            return
        self._state = "flushing"
        while self._held:  # chunks taken while flushing join the queue
            choice, text = self._held.pop(0)
            await self._sink(choice, text)
        self._state = "open"

    def discard(self) -> None:
        """Drop every held chunk and every later one."""
        self._state = "discarded"
        self._held.clear()


class BesideCall(Generic[T]):
    """A call and its judge, started together. Await :meth:`opinion`, then either
    :meth:`release` (the answer, its held chunks sent first) or :meth:`discard`; nothing of
    the call reaches ``sink`` before :meth:`release`."""

    def __init__(
        self,
        generation: Generation[T],
        judging: Awaitable[Opinion],
        sink: ChunkHook | None,
        judge_first: bool = False,
    ) -> None:
        """Start the judge now (in the running loop), and the call too unless
        ``judge_first``."""
        self._chunks = HeldChunks(sink) if sink is not None else None
        self._judging: asyncio.Future[Opinion] = asyncio.ensure_future(judging)
        self._generation = generation
        self._generating: asyncio.Future[T] | None = None
        if not judge_first:
            self._start()
        self._settled = False

    def _start(self) -> asyncio.Future[T]:
        if self._generating is None:
            hook = self._chunks.take if self._chunks is not None else None
            self._generating = asyncio.ensure_future(self._generation(hook))
        return self._generating

    async def opinion(self) -> Opinion:
        """The judge's opinion (the call goes on meanwhile); a judge that raised gives
        ``ask`` with ``purpose-judge-error``. Cancelling this wait cancels neither."""
        try:
            return await asyncio.shield(self._judging)
        except asyncio.CancelledError:
            if self._judging.cancelled() and not self._settled:
                return failed("purpose-judge-error", "the purpose judge was cancelled")
            raise
        except Exception:  # the judge is outside code: fail towards asking
            return failed("purpose-judge-error", "the purpose judge failed")

    @property
    def held(self) -> int:
        """Chunks held back now (0 without a sink, and after release)."""
        return self._chunks.held if self._chunks is not None else 0

    @property
    def answered(self) -> bool:
        """Whether the call has ended (its answer or its failure is held)."""
        return self._generating is not None and self._generating.done()

    async def release(self) -> T:
        """Let the call's chunks through and give its answer (or raise its failure); a call
        made to wait for the judge starts now. A sink that fails while the held chunks go out
        drops the call, and its error is raised."""
        self._settled = True
        if self._chunks is not None:
            try:
                await self._chunks.release()
            except BaseException:
                await self._drop()
                raise
        return await self._start()

    async def discard(self) -> None:
        """Drop the call: its chunks and its answer never reach the site, and a call still
        running is cancelled (its upstream requests with it); the judge too, if it still
        runs."""
        self._settled = True
        if self._chunks is not None:
            self._chunks.discard()
        await self._drop()

    async def close(self) -> None:
        """For ``finally``: discard the call unless it was released or discarded, and stop a
        judge that still runs."""
        if not self._settled:
            await self.discard()
        elif not self._judging.done():
            self._judging.cancel()
            await asyncio.gather(self._judging, return_exceptions=True)

    async def _drop(self) -> None:
        tasks = [task for task in (self._generating, self._judging) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def start_beside(
    generation: Generation[T],
    judging: Awaitable[Opinion],
    sink: ChunkHook | None = None,
    judge_first: bool = False,
) -> BesideCall[T]:
    """Start ``generation`` and ``judging`` together (``judge_first``: the judge alone, the
    call on release); chunks for ``sink`` are held."""
    return BesideCall(generation, judging, sink, judge_first)
