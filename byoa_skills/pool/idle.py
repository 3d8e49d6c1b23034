"""The pool's idle life: let the workers go after ``idle_release`` seconds without use, and
start them again when a call, a grant or a warm-up comes (the states are in
:mod:`byoa_skills.pool.life`).

Nothing is let go while the pool is in use: a call waits or runs, a worker is starting, or
someone waits in :meth:`IdleLife.warm_up`.
"""

from __future__ import annotations

import asyncio
import logging
import time

from byoa_skills.pool.life import Life, PoolLife
from byoa_skills.pool.scheduler import Scheduler
from byoa_skills.pool.supervisor import EventHook, Supervisor

log = logging.getLogger("byoa_skills.pool")


class IdleLife:
    """When the pool was last used, and the moves ``warm`` → ``letting-go`` → ``let-go`` →
    ``waking`` → ``warm`` that depend on it."""

    def __init__(
        self,
        idle_release: float,
        life: PoolLife,
        scheduler: Scheduler,
        supervisor: Supervisor,
        on_event: EventHook,
    ) -> None:
        #: Seconds without use before the workers are let go (0: never).
        self.idle_release = idle_release
        self._life = life
        self._scheduler = scheduler
        self._supervisor = supervisor
        self._on_event = on_event
        self._last_used = time.monotonic()
        self._watch: asyncio.Task[None] | None = None
        #: :meth:`warm_up` calls waiting now.
        self._warming = 0

    def touch(self) -> None:
        """The pool was used now: the idle time counts from here."""
        self._last_used = time.monotonic()

    @property
    def in_use(self) -> bool:
        """Whether a call waits or runs, a worker is starting or someone waits for warmth."""
        scheduler, supervisor = self._scheduler, self._supervisor
        return bool(
            scheduler.in_flight
            or not scheduler.empty
            or supervisor.busy
            or supervisor.starting
            or self._warming
        )

    def watch(self) -> None:
        """Start letting the workers go whenever the pool is idle long enough (nothing when
        ``idle_release`` is 0)."""
        self.touch()
        if self.idle_release > 0:
            self._watch = asyncio.create_task(self._release_when_idle(), name="pool-idle")

    async def stop_watching(self) -> None:
        """End the watch started by :meth:`watch`."""
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)

    async def release(self) -> None:
        """Let every worker go if the pool is warm (or waking) and not in use."""
        if self._life.state not in (Life.WARM, Life.WAKING) or self.in_use:
            return
        self._life.move(Life.LETTING_GO)
        log.info("event=workers-released idle_s=%.0f", time.monotonic() - self._last_used)
        self._on_event("workers-released", len(self._supervisor.slots))
        await self._supervisor.let_go()
        if self._life.state is Life.LETTING_GO:  # not woken meanwhile
            self._life.move(Life.LET_GO)

    def wake(self) -> None:
        """Start the workers again if they were let go (returns at once)."""
        self.touch()
        if self._life.away and self._life.move(Life.WAKING):
            log.info("event=workers-woken")

    async def warm_up(self) -> None:
        """Wake the workers, and return once every slot that has not given up has a warm
        worker."""
        self.wake()
        self._warming += 1
        try:
            await self._supervisor.wait_all_warm()
        finally:
            self._warming -= 1
            self.touch()

    async def _release_when_idle(self) -> None:
        while not self._life.stopping:
            wait = self._last_used + self.idle_release - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            if self._life.away:
                await self._life.wait_for(Life.WAKING, Life.WARM)
            elif self.in_use:
                self.touch()
            else:
                await self.release()
