"""The workers' supervision: one loop per slot that keeps a warm worker in it and runs the
calls the scheduler gives it.

What it promises:

- A worker that dies, overruns its batch's last deadline or has served enough (its drawn
  ``recycle_after`` calls, or ``max_worker_rss_mib``) is replaced in its slot.
- A worker that fails to start is retried with back-off (``restart_backoff``, doubling to
  30 s); after ``max_start_failures`` failures in a row the slot gives up, and once no slot
  is left every waiting call is answered ``skill-unavailable``.
- A slot whose worker was let go (the idle life) waits for the pool to wake, and starts a
  worker again then, or at once when a call is still queued while the pool stops.
- :meth:`Supervisor.wait_all_warm` returns once every slot that has not given up has a warm
  worker; the pool moves from ``waking`` to ``warm`` then.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from collections.abc import Callable

from byoa_skills.pool.batch import run_batch
from byoa_skills.pool.calls import fail, shutting_down, unavailable
from byoa_skills.pool.config import PoolConfig, recycle_threshold
from byoa_skills.pool.errors import WorkerStartFailed
from byoa_skills.pool.life import Life, PoolLife
from byoa_skills.pool.messages import EncoderRunning
from byoa_skills.pool.scheduler import Scheduler
from byoa_skills.pool.slot import Slot
from byoa_skills.pool.worker import WorkerProcess
from byoa_skills.wav import max_frames

log = logging.getLogger("byoa_skills.pool")

#: Called with ("worker-restart", reason), ("worker-ready", seconds to start),
#: ("worker-start-failed", why), ("worker-gave-up", why) and ("workers-released", slots).
EventHook = Callable[[str, str | float], None]


class Supervisor:
    """The slots in ``slots`` (filled by :meth:`open`, shared with the scheduler) and the
    worker in each. ``touch`` is called each time a worker's start ends (the pool was in
    use)."""

    def __init__(
        self,
        config: PoolConfig,
        slots: list[Slot],
        scheduler: Scheduler,
        life: PoolLife,
        on_event: EventHook,
        rng: random.Random,
        touch: Callable[[], None],
    ) -> None:
        self.config = config
        self.slots = slots
        self._scheduler = scheduler
        self._life = life
        self._on_event = on_event
        self._rng = rng
        self._touch = touch
        self._ids = itertools.count(1)
        self._warmth = asyncio.Condition()
        self._telling: set[asyncio.Task[None]] = set()
        #: Workers started again since the pool started (every reason).
        self.restarts = 0
        #: Workers being started now.
        self.starting = 0

    # -- what the pool reads --------------------------------------------------------------

    @property
    def busy(self) -> int:
        """Workers running a batch now (or being replaced after one that failed)."""
        return sum(slot.busy for slot in self.slots)

    @property
    def warm(self) -> int:
        """Workers warm now."""
        return sum(1 for slot in self.slots if slot.warm)

    @property
    def alive(self) -> bool:
        """Whether some worker's process runs."""
        return any(slot.alive for slot in self.slots)

    def all_warm(self) -> bool:
        """Whether every slot that has not given up has a warm worker (or the pool stops)."""
        return self._life.stopping or self.warm >= sum(not s.gave_up for s in self.slots)

    def pids(self) -> list[int]:
        """The process ids of the live workers."""
        return [s.worker.pid for s in self.slots if s.worker and s.worker.alive and s.worker.pid]

    def encoders(self) -> list[EncoderRunning]:
        """The encoder each warm worker said it runs."""
        return [
            s.worker.encoder for s in self.slots if s.worker and s.warm and s.worker.encoder.label
        ]

    # -- the pool's start, idle life and end ----------------------------------------------

    async def start(self) -> None:
        """Open a slot per worker and start every worker; return when all are warm, or
        raise :class:`WorkerStartFailed`. The slots' loops start only with :meth:`serve`."""
        config = self.config
        size = 2 * max_frames(config.max_clip_seconds) * max(1, config.max_batch)
        wide = config.wide_threads > 1 and config.workers > 1
        for index in range(config.workers):
            self.slots.append(Slot.open(index, size, wide=index == 0 and wide))
        await asyncio.gather(*(self._start_worker(slot) for slot in self.slots))

    def serve(self) -> None:
        """Start each slot's loop."""
        for slot in self.slots:
            slot.task = asyncio.create_task(self._serve(slot), name=f"pool-slot-{slot.index}")

    async def let_go(self) -> None:
        """Ask every worker to stop; each slot starts another once the pool wakes."""
        for slot in self.slots:
            slot.let_go = True
        await asyncio.gather(*(s.worker.stop() for s in self.slots if s.worker))

    async def wait_all_warm(self) -> None:
        """Return once :meth:`all_warm`."""
        async with self._warmth:
            await self._warmth.wait_for(self.all_warm)

    async def close(self) -> None:
        """End the slots' loops (a running batch is answered ``shutting-down``), answer the
        waiting calls ``shutting-down``, stop the workers and free the shared memory."""
        await self._tell_warmth()
        for slot in self.slots:
            if slot.task:
                slot.task.cancel()
        await asyncio.gather(*(s.task for s in self.slots if s.task), return_exceptions=True)
        self._scheduler.fail_waiting(shutting_down)
        await asyncio.gather(*(s.worker.stop() for s in self.slots if s.worker))
        for slot in self.slots:
            slot.free()
        self.slots.clear()

    def kill_now(self) -> None:
        """Kill every worker with SIGKILL and free the shared memory, without waiting: the
        second stop signal, when nothing may be waited for."""
        for slot in self.slots:
            if slot.worker:
                slot.worker.kill()
            slot.free()
        self.slots.clear()

    # -- a slot's loop ----------------------------------------------------------------------

    async def _serve(self, slot: Slot) -> None:
        scheduler = self._scheduler
        while not slot.gave_up:
            if slot.let_go or not slot.alive:
                if self._life.away:
                    await self._life.wait_for(Life.WAKING, Life.WARM)
                    continue
                if slot.let_go and self._life.stopping and scheduler.empty:
                    return  # stopping with its worker let go and nothing left to run
                await self._renew(slot)
                continue
            first = await scheduler.next_call(slot)
            if first is None:
                continue
            if scheduler.hand_to_wide(slot, first):
                continue
            calls = scheduler.runnable(await scheduler.join(slot, first))
            if not calls:
                continue
            if slot.let_go or not slot.alive:  # it ended (or was let go) as the calls
                await self._renew(slot)  # arrived: start another, then run them
                if slot.gave_up:
                    for call in calls:
                        fail(call, unavailable())
                    return
            slot.busy = True
            try:
                replace = await run_batch(
                    slot, calls, next(self._ids), lone=scheduler.alone(slot, calls)
                )
                if replace is not None:
                    await self._replace(slot, replace)
            finally:
                slot.busy = False
            if self._should_recycle(slot):
                await self._replace(slot, "recycled")

    async def _renew(self, slot: Slot) -> None:
        """A new worker in ``slot``: after one let go while idle (once it has ended), or
        after one that died."""
        reason = "woken" if slot.let_go else "died"
        if slot.let_go and slot.worker is not None:
            await slot.worker.wait_exit()  # it was asked to stop when it was let go
        slot.let_go = False
        await self._replace(slot, reason)

    def _should_recycle(self, slot: Slot) -> bool:
        config, worker = self.config, slot.worker
        if worker is None:
            return False
        by_calls = 0 < slot.recycle_after <= slot.calls_served
        by_memory = 0 < config.max_worker_rss_mib < worker.rss_mib
        return by_calls or by_memory

    # -- starting, replacing, giving up -----------------------------------------------------

    async def _replace(self, slot: Slot, reason: str) -> None:
        old = slot.worker
        if old is not None:
            log.warning(
                "event=worker-replace slot=%d pid=%s reason=%s calls=%d rss_mib=%.0f",
                slot.index,
                old.pid,
                reason,
                slot.calls_served,
                old.rss_mib,
            )
            await old.stop()
        self.restarts += 1
        self._on_event("worker-restart", reason)
        delay = self.config.restart_backoff
        for failures in itertools.count(1):
            try:
                await self._start_worker(slot)
                return
            except WorkerStartFailed as error:
                log.error(
                    "event=worker-start-failed slot=%d failures=%d error=%r",
                    slot.index,
                    failures,
                    str(error),
                )
                self._on_event("worker-start-failed", str(error))
                if failures >= self.config.max_start_failures:
                    self._give_up(slot, str(error))
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    def _give_up(self, slot: Slot, error: str) -> None:
        """Stop restarting ``slot``; once no slot is left, answer every queued call."""
        log.error("event=worker-gave-up slot=%d error=%r", slot.index, error)
        slot.gave_up = True
        slot.worker = None
        self._scheduler.take_back(slot)
        telling = asyncio.get_running_loop().create_task(self._tell_warmth())
        self._telling.add(telling)
        telling.add_done_callback(self._telling.discard)
        self._on_event("worker-gave-up", error)
        if not self._scheduler.available:
            self._scheduler.fail_waiting(unavailable)

    async def _start_worker(self, slot: Slot) -> None:
        self.starting += 1
        try:
            await self._start_worker_now(slot)
        finally:
            self.starting -= 1
            self._touch()

    async def _start_worker_now(self, slot: Slot) -> None:
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
            slot.index,
            slot.worker.pid,
            seconds,
            slot.worker.rss_mib,
        )
        self._on_event("worker-ready", seconds)

    async def _tell_warmth(self) -> None:
        """Wake :meth:`wait_all_warm`'s waiters to look at the workers again; the pool is
        warm again once every slot woken has a warm worker."""
        woken = not any(slot.let_go for slot in self.slots)
        if self._life.state is Life.WAKING and woken and self.all_warm():
            self._life.move(Life.WARM)
        async with self._warmth:
            self._warmth.notify_all()
