"""Admission and scheduling: which calls the pool takes, where they wait, and which of them
a free worker runs next, alone or together.

- **Admission.** Sites' clips have ``max_queue`` places and are refused ``queue-full`` at
  once beyond them; the pieces of long recordings have ``max_queue`` places of their own and
  wait for one, within their deadline. A call never runs past its deadline's wait.
- **Order.** ``SITE`` before ``BULK``, each in arrival order (:class:`CallQueue`).
- **Batches.** A free worker takes the waiting calls of the first one's length group
  (:func:`length_group`), up to ``max_batch``, and waits ``batch_window`` for more only
  while every other worker is busy.
- **A lone call** (nothing else waiting, no other worker busy) goes to the slot whose worker
  keeps an encoder on the idle cores, when that one waits with a warm worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable

from byoa_skills.pool.calls import (
    Call,
    CallQueue,
    Priority,
    Transcription,
    fail,
    shutting_down,
    unavailable,
)
from byoa_skills.pool.config import PoolConfig
from byoa_skills.pool.errors import (
    CallFailure,
    DeadlineExceeded,
    QueueFull,
    ShuttingDown,
    TranscribeFailed,
)
from byoa_skills.pool.life import PoolLife
from byoa_skills.pool.slot import Slot
from byoa_skills.runtimes.speech.options import DecodeRequest
from byoa_skills.wav import SAMPLE_RATE, Clip, max_frames

#: The clip lengths (seconds, upper bounds) a batch keeps together: a batch waits for its
#: longest clip's decode, so only clips of about one length gain by sharing it
#: (docs/pool.md).
LENGTH_GROUPS = (2.0, 6.0, 15.0)


def length_group(frames: int) -> int:
    """Which of :data:`LENGTH_GROUPS` a clip of ``frames`` samples falls in (the last group,
    ``len(LENGTH_GROUPS)``, holds everything longer)."""
    seconds = frames / SAMPLE_RATE
    return next(
        (index for index, bound in enumerate(LENGTH_GROUPS) if seconds <= bound),
        len(LENGTH_GROUPS),
    )


class Scheduler:
    """The queue in front of ``slots`` (the supervisor's list, read here, never changed)."""

    def __init__(self, config: PoolConfig, slots: list[Slot], life: PoolLife) -> None:
        self.config = config
        self._slots = slots
        self._life = life
        self._queue = CallQueue()  # bounded by priority, in check and call
        self._arrivals = itertools.count()
        self.in_flight = 0
        self._drained = asyncio.Event()
        self._drained.set()

    # -- admission ----------------------------------------------------------------------

    @property
    def depth(self) -> int:
        """Calls waiting for a worker."""
        return self._queue.qsize()

    @property
    def empty(self) -> bool:
        """Whether no call waits for a worker."""
        return self._queue.empty()

    @property
    def available(self) -> bool:
        """Whether some slot still has, or is still trying to start, a worker."""
        return any(not slot.gave_up for slot in self._slots)

    def check(self, clip: Clip, priority: Priority) -> None:
        """Refuse at once a call that can never be taken now: ``skill-unavailable``, a clip
        longer than the pool takes, or ``queue-full`` for a site's clip."""
        if not self.available:
            raise unavailable()
        if clip.frames > max_frames(self.config.max_clip_seconds):
            raise TranscribeFailed(f"a clip of {clip.seconds:.1f} s is longer than the pool takes")
        if priority == Priority.SITE and self._queue.waiting[priority] >= self.config.max_queue:
            raise QueueFull(f"{self.config.max_queue} calls are already waiting")

    async def call(
        self,
        clip: Clip,
        language: str | None,
        deadline: float | None,
        request: DecodeRequest | None,
        priority: Priority,
    ) -> Transcription:
        """Queue the call (a ``BULK`` one once it has a place) and return its answer, or
        raise its failure; ``deadline``: seconds from now (None: the configured default)."""
        now = time.monotonic()
        seconds = self.config.default_deadline if deadline is None else deadline
        self.in_flight += 1
        self._drained.clear()
        try:
            if priority == Priority.BULK:
                await self._place_for_bulk(now + seconds)
            future = asyncio.get_running_loop().create_future()
            call = Call(
                clip,
                language,
                now,
                now + seconds,
                future,
                request=request or DecodeRequest(),
                priority=priority,
                order=next(self._arrivals),
            )
            self._queue.put_nowait(call)
            left = max(0.0, call.deadline - time.monotonic())
            try:
                return await asyncio.wait_for(asyncio.shield(call.future), left)
            except asyncio.TimeoutError:
                if call.started is None:
                    call.abandoned = True
                    raise DeadlineExceeded(
                        f"no worker took the call within {seconds:g} s"
                    ) from None
                return await call.future  # the slot answers at the same deadline
            except asyncio.CancelledError:
                call.abandoned = call.started is None
                raise
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self._drained.set()

    async def wait_drained(self) -> None:
        """Return once no call taken is waiting for its answer."""
        await self._drained.wait()

    async def _place_for_bulk(self, until: float) -> None:
        """Return once fewer than ``max_queue`` ``BULK`` calls wait; raise
        ``deadline-exceeded`` at ``until`` (monotonic time), ``shutting-down`` when the pool
        stops meanwhile."""
        while self._queue.waiting[Priority.BULK] >= self.config.max_queue:
            left = until - time.monotonic()
            if left <= 0:
                raise DeadlineExceeded("no place in the queue came free before the deadline")
            self._queue.room.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._queue.room.wait(), left)
            if self._life.stopping:
                raise ShuttingDown("the engine is shutting down and takes no new calls")
            if not self.available:
                raise unavailable()

    # -- what runs next -----------------------------------------------------------------

    async def next_call(self, slot: Slot) -> Call | None:
        """The next queued call (or, for the wide slot, one handed to it), or None when the
        idle worker dies first."""
        assert slot.worker is not None
        taking = asyncio.ensure_future(self._queue.get())
        handed = asyncio.ensure_future(slot.handed.get()) if slot.wide else None
        exiting = asyncio.ensure_future(slot.worker.wait_exit())
        waits = {taking, exiting} | ({handed} if handed else set())
        slot.waiting = True
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the pool is closing: a call just taken is answered
            for got in (taking, handed):
                if got is not None and got.done() and not got.cancelled():
                    fail(got.result(), shutting_down())
            raise
        finally:
            slot.waiting = False
            exiting.cancel()
            for got in (taking, handed):
                if got is not None and not got.done():
                    got.cancel()
        took = [
            got.result()
            for got in (handed, taking)
            if got is not None and got.done() and not got.cancelled()
        ]
        for call in took[1:]:  # a handed call and a queued one at once: the queued one waits
            self._queue.put_nowait(call)
        return took[0] if took else None

    def hand_to_wide(self, slot: Slot, call: Call) -> bool:
        """Give ``call`` to the wide slot when it would run alone there: this slot has no
        wide encoder, the wide slot waits with a warm worker, no other worker is busy and
        nothing else waits. Whether it was handed."""
        if slot.wide or not self._queue.empty() or call.request != DecodeRequest():
            return False
        wide = next((s for s in self._slots if s.wide), None)
        if wide is None or not wide.waiting or not wide.warm:
            return False
        if any(s.busy for s in self._slots if s is not slot):
            return False
        wide.handed.put_nowait(call)
        return True

    async def join(self, slot: Slot, first: Call) -> list[Call]:
        """``first`` and the calls of its length group (:func:`length_group`) that join its
        batch: every one waiting now, up to the batch size, and those that come within the
        batch window while no other worker is free to take them. Calls of other lengths go
        back to the queue in their places."""
        calls = [first]
        limit = max(1, self.config.max_batch)
        if limit == 1:
            return calls
        group = length_group(first.clip.frames)
        others: list[Call] = []
        while len(calls) < limit and not self._queue.empty():  # no await: nothing else runs
            call = self._queue.get_nowait()
            (calls if length_group(call.clip.frames) == group else others).append(call)
        for call in others:  # back in their places, before anyone else can fill the queue
            self._queue.put_nowait(call)
        closes = time.monotonic() + self.config.batch_window
        while len(calls) < limit:
            wait = closes - time.monotonic()
            others_busy = all(s.busy or s.gave_up or s is slot for s in self._slots)
            if wait <= 0 or not others_busy:
                break
            try:
                call = await asyncio.wait_for(self._queue.get(), wait)
            except asyncio.TimeoutError:
                break
            if length_group(call.clip.frames) != group:
                try:
                    self._queue.put_nowait(call)
                except asyncio.QueueFull:  # its room was taken meanwhile: it runs here
                    calls.append(call)
                break
            calls.append(call)
        return calls

    @staticmethod
    def runnable(calls: list[Call]) -> list[Call]:
        """The calls still worth running: not given up, not answered, not past deadline."""
        runnable = []
        for call in calls:
            if call.abandoned or call.future.done():
                continue
            if time.monotonic() >= call.deadline:
                fail(call, DeadlineExceeded("the deadline passed while the call waited"))
                continue
            runnable.append(call)
        return runnable

    def alone(self, slot: Slot, calls: list[Call]) -> bool:
        """Whether ``calls`` may have the idle cores: one call, no other worker busy, nothing
        waiting, and workers that keep an encoder for it."""
        others_idle = not any(s.busy for s in self._slots if s is not slot)
        return slot.wide and len(calls) == 1 and others_idle and self._queue.empty()

    # -- calls no worker will take ------------------------------------------------------

    def take_back(self, slot: Slot) -> None:
        """Put the lone calls handed to ``slot`` back in the queue (its worker gave up)."""
        while not slot.handed.empty():
            self._queue.put_nowait(slot.handed.get_nowait())

    def fail_waiting(self, failure: Callable[[], CallFailure]) -> None:
        """Answer every waiting call, queued or handed to a slot, with a ``failure()``."""
        while not self._queue.empty():
            fail(self._queue.get_nowait(), failure())
        for slot in self._slots:
            while not slot.handed.empty():
                fail(slot.handed.get_nowait(), failure())
