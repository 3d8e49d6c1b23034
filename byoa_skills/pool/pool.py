"""The warm pool: a bounded queue in front of worker processes that each hold the model.

The queue keeps places of its own for sites' clips: ``max_queue`` of them may wait, whatever
waits besides; the pieces of long recordings have ``max_queue`` places of their own, and a
piece that finds them taken waits for one instead of being refused.

Each worker has a slot: a shared memory block for a batch of clips' samples and a loop that
takes the next calls from the queue (every waiting call, up to the batch size), runs them as
one batch, and replaces the worker when it dies, overruns a deadline, or has served enough.
The slot loop is the one owner of a running call. A slot whose worker fails to start too many
times in a row stops trying; when no slot is left, every call is answered ``skill-unavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from multiprocessing.shared_memory import SharedMemory

import numpy as np

from byoa_skills.pool.config import PoolConfig, recycle_threshold
from byoa_skills.pool.errors import (
    CallFailure,
    DeadlineExceeded,
    NotReady,
    QueueFull,
    ShuttingDown,
    SkillUnavailable,
    TranscribeFailed,
    WorkerCrashed,
    WorkerStartFailed,
)
from byoa_skills.pool.life import Life, PoolLife
from byoa_skills.pool.messages import Job, JobItem, Refusal
from byoa_skills.pool.worker import WorkerDied, WorkerProcess
from byoa_skills.runtimes.speech.base import Transcript
from byoa_skills.runtimes.speech.options import DecodeRequest
from byoa_skills.wav import SAMPLE_RATE, Clip, max_frames

log = logging.getLogger("byoa_skills.pool")

#: Called with ("worker-restart", reason), ("worker-ready", seconds to start),
#: ("worker-start-failed", why) and ("worker-gave-up", why).
EventHook = Callable[[str, str | float], None]


class Priority(IntEnum):
    """Which waiting calls a free worker takes first: sites' clips (``SITE``) before the
    pieces of the visitor's long recordings (``BULK``); calls of one priority in order.
    Each priority has its own places in the queue (:class:`WorkerPool`)."""

    SITE = 0
    BULK = 1


@dataclass(frozen=True)
class Transcription:
    """A pool's answer to one clip: what the worker's runtime heard, and the pool's timing."""

    transcript: Transcript
    #: Seconds from the call's arrival to its answer; of them, waiting in the queue.
    seconds: float
    queued_seconds: float
    worker_pid: int
    #: How many calls the worker decoded together with this one (itself included).
    batch_size: int = 1
    #: Whether it ran as a lone call (no other worker busy, nothing waiting): its encoder
    #: could use the idle cores.
    lone: bool = False

    @property
    def text(self) -> str:
        """The text spoken (see :class:`Transcript`)."""
        return self.transcript.text

    @property
    def language(self) -> str | None:
        """The language the text was decoded in."""
        return self.transcript.language

    @property
    def language_probability(self) -> float:
        """The model's probability for a detected language; 1.0 for one asked for."""
        return self.transcript.language_probability

    @property
    def inference_seconds(self) -> float:
        """The model's own time in the worker, for the whole batch."""
        return self.transcript.seconds


@dataclass
class _Call:
    clip: Clip
    language: str | None
    arrived: float
    deadline: float
    future: asyncio.Future[Transcription]
    started: float | None = None
    abandoned: bool = False
    request: DecodeRequest = field(default_factory=DecodeRequest)
    priority: Priority = Priority.SITE
    #: Arrival order, for calls of the same priority.
    order: int = 0

    def __lt__(self, other: _Call) -> bool:  # the queue's order
        return (self.priority, self.order) < (other.priority, other.order)


class _CallQueue(asyncio.PriorityQueue[_Call]):
    """The calls waiting for a worker, the highest priority first, with how many of each
    priority wait; ``room`` is set each time a ``BULK`` call leaves."""

    def _init(self, maxsize: int) -> None:
        super()._init(maxsize)
        self.waiting: dict[Priority, int] = dict.fromkeys(Priority, 0)
        self.room = asyncio.Event()

    def _put(self, item: _Call) -> None:
        super()._put(item)
        self.waiting[item.priority] += 1

    def _get(self) -> _Call:
        item = super()._get()
        self.waiting[item.priority] -= 1
        if item.priority == Priority.BULK:
            self.room.set()
        return item


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


@dataclass
class _Slot:
    index: int
    shm: SharedMemory
    samples: np.ndarray
    worker: WorkerProcess | None = None
    calls_served: int = 0
    #: The calls after which this slot's worker is recycled (0: never), drawn per worker.
    recycle_after: int = 0
    busy: bool = False
    #: The slot's worker failed to start too many times in a row: it stopped trying.
    gave_up: bool = False
    #: The slot's worker was let go while the pool was idle; the next call starts another.
    let_go: bool = False
    #: Its worker keeps an encoder on the idle cores for lone calls (one slot at most).
    wide: bool = False
    #: It waits in :meth:`WorkerPool._next_call` for a call, with a warm worker.
    waiting: bool = False
    #: Lone calls another slot took from the queue and handed to this (wide) one.
    handed: asyncio.Queue[_Call] = field(default_factory=asyncio.Queue, repr=False)
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class WorkerPool:
    """Warm worker processes answering ``audio.transcribe`` clips, one batch per worker at a
    time, with a bounded queue, per-call deadlines and self-healing workers.

    The queue holds at most ``config.max_queue`` calls of each priority: sites' clips beyond
    that are refused ``queue-full``; the pieces of long recordings beyond it wait for a place,
    so no number of recordings can take a place a site's clip needs.

    ``rng`` draws each worker's recycle threshold (a seeded one makes them reproducible).
    """

    def __init__(
        self,
        config: PoolConfig,
        on_event: EventHook | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self._on_event = on_event or (lambda kind, value: None)
        self._rng = rng or random.Random()
        self._queue = _CallQueue()  # bounded by priority, in transcribe
        self._slots: list[_Slot] = []
        self._ids = itertools.count(1)
        self._arrivals = itertools.count()
        #: Warming, warm, letting go, let go, waking or stopping (docs/pool.md).
        self._life = PoolLife()
        self._started = False
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.restarts = 0
        self._warmth = asyncio.Condition()
        self._last_used = time.monotonic()
        self._idle_watch: asyncio.Task[None] | None = None
        self._telling: set[asyncio.Task[None]] = set()
        #: Workers being started now, and :meth:`warm_up` calls waiting: the pool is in use.
        self._starting = 0
        self._warming = 0

    # -- life cycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Start every worker and return when all are warm; raise
        :class:`WorkerStartFailed` (after stopping the others) if one cannot start."""
        size = 2 * max_frames(self.config.max_clip_seconds) * max(1, self.config.max_batch)
        wide = self.config.wide_threads > 1 and self.config.workers > 1
        for index in range(self.config.workers):
            shm = SharedMemory(create=True, size=size)
            samples = np.ndarray((size // 2,), dtype="<i2", buffer=shm.buf)
            self._slots.append(_Slot(index, shm, samples, wide=index == 0 and wide))
        try:
            await asyncio.gather(*(self._start_worker(slot) for slot in self._slots))
        except BaseException:
            await self.close()
            raise
        for slot in self._slots:
            slot.task = asyncio.create_task(self._serve(slot), name=f"pool-slot-{slot.index}")
        self._started = True
        self._life.move(Life.WARM)
        self._last_used = time.monotonic()
        if self.config.idle_release > 0:
            self._idle_watch = asyncio.create_task(self._release_when_idle(), name="pool-idle")

    @property
    def ready(self) -> bool:
        """Whether calls are taken: at least one worker is warm, or the workers were let go
        while idle (the next call starts them again)."""
        alive = any(s.worker is not None and s.worker.alive for s in self._slots)
        return self._started and not self._draining and (self._life.away or alive)

    @property
    def released(self) -> bool:
        """Whether the workers were let go after the idle time (or are being let go) and not
        started again yet."""
        return self._life.away

    @property
    def life(self) -> Life:
        """The pool's state: warming, warm, letting go, let go, waking or stopping."""
        return self._life.state

    @property
    def _draining(self) -> bool:
        return self._life.stopping

    @property
    def in_use(self) -> bool:
        """Whether a call waits or runs, a worker is starting or someone waits for warmth."""
        return bool(
            self._in_flight or not self._queue.empty() or self.busy_workers
            or self._starting or self._warming
        )  # fmt: skip

    async def release(self) -> None:
        """Let every worker go (the front process and the shared memory stay); the next call,
        or :meth:`warm_up`, starts them again. Nothing is let go while the pool is in use
        (:attr:`in_use`)."""
        if self._life.state not in (Life.WARM, Life.WAKING) or not self._started or self.in_use:
            return
        self._life.move(Life.LETTING_GO)
        log.info("event=workers-released idle_s=%.0f", time.monotonic() - self._last_used)
        self._on_event("workers-released", len(self._slots))
        for slot in self._slots:
            slot.let_go = True
        await asyncio.gather(*(s.worker.stop() for s in self._slots if s.worker))
        if self._life.state is Life.LETTING_GO:  # not woken meanwhile
            self._life.move(Life.LET_GO)

    def wake(self) -> None:
        """Start the workers again if they were let go (returns at once)."""
        self._last_used = time.monotonic()
        if self._life.away and self._life.move(Life.WAKING):
            log.info("event=workers-woken")

    async def warm_up(self) -> None:
        """Start the workers if they were let go, and return once every slot that has not
        given up has a warm worker."""
        self.wake()
        self._warming += 1
        try:
            async with self._warmth:
                await self._warmth.wait_for(self._all_warm)
        finally:
            self._warming -= 1
            self._last_used = time.monotonic()

    def _all_warm(self) -> bool:
        return self._draining or self.warm_workers >= sum(not s.gave_up for s in self._slots)

    async def _release_when_idle(self) -> None:
        idle = self.config.idle_release
        while not self._draining:
            wait = self._last_used + idle - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            if self._life.away:
                await self._life.wait_for(Life.WAKING, Life.WARM)
            elif self.in_use:
                self._last_used = time.monotonic()
            else:
                await self.release()

    @property
    def queue_depth(self) -> int:
        """Calls waiting for a worker."""
        return self._queue.qsize()

    @property
    def busy_workers(self) -> int:
        """Workers running a call now."""
        return sum(slot.busy for slot in self._slots)

    @property
    def available(self) -> bool:
        """Whether some slot still has, or is still trying to start, a worker; False once
        every slot gave up (calls are then answered ``skill-unavailable``)."""
        return any(not slot.gave_up for slot in self._slots)

    def recycle_thresholds(self) -> list[int]:
        """Each slot's calls after which its current worker is recycled (0: never)."""
        return [slot.recycle_after for slot in self._slots]

    @property
    def warm_workers(self) -> int:
        """How many workers are warm now (fewer than configured while one is replaced)."""
        return sum(1 for s in self._slots if s.worker is not None and s.worker.warm)

    def worker_pids(self) -> list[int]:
        """The process ids of the live workers."""
        return [s.worker.pid for s in self._slots if s.worker and s.worker.alive and s.worker.pid]

    async def drain(self) -> None:
        """Refuse new calls; return when every queued and running call has its answer.
        From any state: a pool whose workers were let go has no call to wait for."""
        self._life.stop()
        await self._idle.wait()

    async def close(self) -> None:
        """Stop the workers (calls still waiting get ``shutting-down``) and free the memory,
        from any state."""
        self._life.stop()
        self._started = False
        if self._idle_watch is not None:
            self._idle_watch.cancel()
            await asyncio.gather(self._idle_watch, return_exceptions=True)
        await self._tell_warmth()
        for slot in self._slots:
            if slot.task:
                slot.task.cancel()
        await asyncio.gather(*(s.task for s in self._slots if s.task), return_exceptions=True)
        while not self._queue.empty():
            call = self._queue.get_nowait()
            _fail(call, ShuttingDown("the engine is shutting down"))
        for slot in self._slots:
            while not slot.handed.empty():
                _fail(slot.handed.get_nowait(), ShuttingDown("the engine is shutting down"))
        await asyncio.gather(*(s.worker.stop() for s in self._slots if s.worker))
        for slot in self._slots:
            del slot.samples
            slot.shm.close()
            with contextlib.suppress(FileNotFoundError):
                slot.shm.unlink()
        self._slots.clear()

    # -- calls --------------------------------------------------------------------------

    async def transcribe(
        self,
        clip: Clip,
        language: str | None = None,
        deadline: float | None = None,
        *,
        request: DecodeRequest | None = None,
        priority: Priority = Priority.SITE,
    ) -> Transcription:
        """Transcribe one clip within ``deadline`` seconds (the configured default if None),
        decoded as ``request`` asks (default: text only). A free worker takes the waiting
        calls of the highest ``priority`` first, so a long recording's ``BULK`` pieces yield
        to sites' clips between them.

        Raises a :class:`CallFailure`: ``queue-full`` at once when ``max_queue`` sites'
        clips already wait (a ``BULK`` call waits for one of its own places instead, within
        its deadline), ``skill-unavailable`` at once when no worker can start,
        ``shutting-down``, ``deadline-exceeded``, ``worker-crashed``, or the model's refusal.
        """
        if self._draining:
            raise ShuttingDown("the engine is shutting down and takes no new calls")
        if not self._started:
            raise NotReady("the workers are still loading the model")
        if not self.available:
            raise _unavailable()
        if clip.frames > max_frames(self.config.max_clip_seconds):
            raise TranscribeFailed(f"a clip of {clip.seconds:.1f} s is longer than the pool takes")
        if priority == Priority.SITE and self._queue.waiting[priority] >= self.config.max_queue:
            raise QueueFull(f"{self.config.max_queue} calls are already waiting")
        self.wake()
        now = time.monotonic()
        seconds = self.config.default_deadline if deadline is None else deadline
        self._in_flight += 1
        self._idle.clear()
        try:
            if priority == Priority.BULK:
                await self._place_for_bulk(now + seconds)
            future = asyncio.get_running_loop().create_future()
            call = _Call(clip, language, now, now + seconds, future,
                         request=request or DecodeRequest(), priority=priority,
                         order=next(self._arrivals))  # fmt: skip
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
            self._in_flight -= 1
            self._last_used = time.monotonic()
            if self._in_flight == 0:
                self._idle.set()

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
            if self._draining:
                raise ShuttingDown("the engine is shutting down and takes no new calls")
            if not self.available:
                raise _unavailable()

    # -- slots --------------------------------------------------------------------------

    async def _serve(self, slot: _Slot) -> None:
        while not slot.gave_up:
            if slot.let_go or slot.worker is None or not slot.worker.alive:
                if self._life.away:
                    await self._life.wait_for(Life.WAKING, Life.WARM)
                    continue
                if slot.let_go and self._draining and self._queue.empty():
                    return  # stopping with its worker let go and nothing left to run
                await self._renew(slot)
                continue
            first = await self._next_call(slot)
            if first is None:
                continue
            if self._hand_to_wide(slot, first):
                continue
            calls = self._runnable(await self._join(slot, first))
            if not calls:
                continue
            if slot.let_go or not slot.worker.alive:  # it ended (or was let go) as the calls
                await self._renew(slot)  # arrived: start another, then run them
                if slot.gave_up:
                    for call in calls:
                        _fail(call, _unavailable())
                    return
            slot.busy = True
            try:
                await self._run(slot, calls)
            finally:
                slot.busy = False
            if self._should_recycle(slot):
                await self._replace(slot, "recycled")

    async def _renew(self, slot: _Slot) -> None:
        """A new worker in ``slot``: after one let go while idle (once it has ended), or
        after one that died."""
        reason = "woken" if slot.let_go else "died"
        if slot.let_go and slot.worker is not None:
            await slot.worker.wait_exit()  # it was asked to stop when it was let go
        slot.let_go = False
        await self._replace(slot, reason)

    async def _join(self, slot: _Slot, first: _Call) -> list[_Call]:
        """``first`` and the calls of its length group (:func:`length_group`) that join its
        batch: every one waiting now, up to the batch size, and those that come within the
        batch window while no other worker is free to take them. Calls of other lengths go
        back to the queue in their places."""
        calls = [first]
        limit = max(1, self.config.max_batch)
        if limit == 1:
            return calls
        group = length_group(first.clip.frames)
        others: list[_Call] = []
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
    def _runnable(calls: list[_Call]) -> list[_Call]:
        """The calls still worth running: not given up, not answered, not past deadline."""
        runnable = []
        for call in calls:
            if call.abandoned or call.future.done():
                continue
            if time.monotonic() >= call.deadline:
                _fail(call, DeadlineExceeded("the deadline passed while the call waited"))
                continue
            runnable.append(call)
        return runnable

    async def _next_call(self, slot: _Slot) -> _Call | None:
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
                    _fail(got.result(), ShuttingDown("the engine is shutting down"))
            raise
        finally:
            slot.waiting = False
            exiting.cancel()
            for got in (taking, handed):
                if got is not None and not got.done():
                    got.cancel()
        took = [got.result() for got in (handed, taking)
                if got is not None and got.done() and not got.cancelled()]  # fmt: skip
        for call in took[1:]:  # a handed call and a queued one at once: the queued one waits
            self._queue.put_nowait(call)
        return took[0] if took else None

    def _hand_to_wide(self, slot: _Slot, call: _Call) -> bool:
        """Give ``call`` to the wide slot when it would run alone there: this slot has no
        wide encoder, the wide slot waits with a warm worker, no other worker is busy and
        nothing else waits. Whether it was handed."""
        if slot.wide or not self._queue.empty() or call.request != DecodeRequest():
            return False
        wide = next((s for s in self._slots if s.wide), None)
        if wide is None or not wide.waiting or wide.worker is None or not wide.worker.warm:
            return False
        if any(s.busy for s in self._slots if s is not slot):
            return False
        wide.handed.put_nowait(call)
        return True

    async def _run(self, slot: _Slot, calls: list[_Call]) -> None:
        """Run a batch. Each call is answered at its own deadline if the batch is still
        running then; the worker is killed only when the last deadline passes."""
        worker = slot.worker
        assert worker is not None
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        items, offset = [], 0
        for call in calls:
            call.started = started
            slot.samples[offset : offset + call.clip.frames] = call.clip.samples
            items.append(JobItem(offset, call.clip.frames, call.language, call.request))
            offset += call.clip.frames
        overrun = "the call overran its deadline"
        timers = [
            loop.call_later(call.deadline - started, _fail, call, DeadlineExceeded(overrun))
            for call in calls
        ]
        lone = self._alone(slot, calls)
        job = worker.run(Job(next(self._ids), tuple(items), lone=lone))
        try:
            answers = await asyncio.wait_for(job, max(c.deadline for c in calls) - started)
        except asyncio.TimeoutError:
            worker.kill()
            for call in calls:
                _fail(call, DeadlineExceeded(f"{overrun}; its worker was replaced"))
            await self._replace(slot, "deadline")
            return
        except WorkerDied as died:
            for call in calls:
                _fail(call, WorkerCrashed(str(died)))
            await self._replace(slot, "crashed")
            return
        except asyncio.CancelledError:  # the pool is closing with these calls running
            worker.kill()
            for call in calls:
                _fail(call, ShuttingDown("the engine stopped before the call finished"))
            raise
        finally:
            for timer in timers:
                timer.cancel()
        slot.calls_served += len(calls)
        done = time.monotonic()
        if len(calls) > 1:
            log.debug("event=batch slot=%d size=%d ms=%.0f", slot.index, len(calls),
                      (done - started) * 1000)  # fmt: skip
        for call, answer in zip(calls, answers, strict=True):
            if isinstance(answer, Refusal):
                _fail(call, TranscribeFailed(answer.message, answer.code))
                continue
            transcription = Transcription(
                transcript=answer,
                seconds=done - call.arrived,
                queued_seconds=started - call.arrived,
                worker_pid=worker.pid or 0,
                batch_size=len(calls),
                lone=lone,
            )
            if not call.future.done():
                call.future.set_result(transcription)

    def _alone(self, slot: _Slot, calls: list[_Call]) -> bool:
        """Whether ``calls`` may have the idle cores: one call, no other worker busy, nothing
        waiting, and workers that keep an encoder for it."""
        others_idle = not any(s.busy for s in self._slots if s is not slot)
        return slot.wide and len(calls) == 1 and others_idle and self._queue.empty()

    def _should_recycle(self, slot: _Slot) -> bool:
        config, worker = self.config, slot.worker
        if worker is None:
            return False
        by_calls = 0 < slot.recycle_after <= slot.calls_served
        by_memory = 0 < config.max_worker_rss_mib < worker.rss_mib
        return by_calls or by_memory

    async def _replace(self, slot: _Slot, reason: str) -> None:
        old = slot.worker
        if old is not None:
            log.warning(
                "event=worker-replace slot=%d pid=%s reason=%s calls=%d rss_mib=%.0f",
                slot.index, old.pid, reason, slot.calls_served, old.rss_mib,
            )  # fmt: skip
            await old.stop()
        self.restarts += 1
        self._on_event("worker-restart", reason)
        delay = self.config.restart_backoff
        for failures in itertools.count(1):
            try:
                await self._start_worker(slot)
                return
            except WorkerStartFailed as error:
                log.error("event=worker-start-failed slot=%d failures=%d error=%r",
                          slot.index, failures, str(error))  # fmt: skip
                self._on_event("worker-start-failed", str(error))
                if failures >= self.config.max_start_failures:
                    self._give_up(slot, str(error))
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def _tell_warmth(self) -> None:
        """Wake :meth:`warm_up`'s waiters to look at the workers again; the pool is warm
        again once every slot woken has a warm worker."""
        woken = not any(slot.let_go for slot in self._slots)
        if self._life.state is Life.WAKING and woken and self._all_warm():
            self._life.move(Life.WARM)
        async with self._warmth:
            self._warmth.notify_all()

    def _give_up(self, slot: _Slot, error: str) -> None:
        """Stop restarting ``slot``; once no slot is left, answer every queued call."""
        log.error("event=worker-gave-up slot=%d error=%r", slot.index, error)
        slot.gave_up = True
        slot.worker = None
        while not slot.handed.empty():  # lone calls handed to it go back to the queue
            self._queue.put_nowait(slot.handed.get_nowait())
        telling = asyncio.get_running_loop().create_task(self._tell_warmth())
        self._telling.add(telling)
        telling.add_done_callback(self._telling.discard)
        self._on_event("worker-gave-up", error)
        if not self.available:
            while not self._queue.empty():
                _fail(self._queue.get_nowait(), _unavailable())

    async def _start_worker(self, slot: _Slot) -> None:
        self._starting += 1
        try:
            await self._start_worker_now(slot)
        finally:
            self._starting -= 1
            self._last_used = time.monotonic()

    async def _start_worker_now(self, slot: _Slot) -> None:
        began = time.monotonic()
        slot.worker = WorkerProcess(
            self.config, slot.shm.name, f"byoa-worker-{slot.index}", wide=slot.wide
        )
        slot.calls_served = 0
        config = self.config
        slot.recycle_after = recycle_threshold(
            config.recycle_after_calls, config.recycle_jitter, self._rng
        )
        await slot.worker.wait_ready()
        seconds = time.monotonic() - began
        await self._tell_warmth()
        log.info(
            "event=worker-ready slot=%d pid=%s start_s=%.2f rss_mib=%.0f",
            slot.index, slot.worker.pid, seconds, slot.worker.rss_mib,
        )  # fmt: skip
        self._on_event("worker-ready", seconds)


def _unavailable() -> SkillUnavailable:
    return SkillUnavailable("no speech worker can start here; see the engine's log")


def _fail(call: _Call, failure: CallFailure) -> None:
    if not call.future.done():
        call.future.set_exception(failure)
        call.future.exception()  # retrieved here: a caller that gave up may never read it
