"""The warm pool's front: :class:`WorkerPool`, the one object callers hold. It wires the
parts together and keeps none of their work:

- admission and scheduling, :mod:`~byoa_skills.pool.scheduler`: the bounded queue with its
  priorities, batches, and the lone call's wide encoder;
- the workers' supervision, :mod:`~byoa_skills.pool.supervisor`: a slot per worker, starting,
  replacing, recycling, giving up;
- the pool's life, :mod:`~byoa_skills.pool.life` (its states) and
  :mod:`~byoa_skills.pool.idle` (letting the workers go when idle, waking them).

docs/pool.md says what each promises.
"""

from __future__ import annotations

import random

from byoa_skills.pool.calls import Priority, Transcription
from byoa_skills.pool.config import PoolConfig
from byoa_skills.pool.errors import NotReady, ShuttingDown
from byoa_skills.pool.idle import IdleLife
from byoa_skills.pool.life import Life, PoolLife
from byoa_skills.pool.messages import EncoderRunning
from byoa_skills.pool.scheduler import LENGTH_GROUPS, Scheduler, length_group
from byoa_skills.pool.slot import Slot
from byoa_skills.pool.supervisor import EventHook, Supervisor
from byoa_skills.runtimes.speech.options import DecodeRequest
from byoa_skills.wav import Clip

__all__ = ["LENGTH_GROUPS", "EventHook", "Priority", "Transcription", "WorkerPool", "length_group"]


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
        on_event = on_event or (lambda kind, value: None)
        #: Warming, warm, letting go, let go, waking or stopping (docs/pool.md).
        self._life = PoolLife()
        self._started = False
        slots: list[Slot] = []
        self._scheduler = Scheduler(config, slots, self._life)
        self._supervisor = Supervisor(
            config,
            slots,
            self._scheduler,
            self._life,
            on_event,
            rng or random.Random(),
            touch=lambda: self._idle.touch(),
        )
        self._idle = IdleLife(
            config.idle_release, self._life, self._scheduler, self._supervisor, on_event
        )

    # -- life cycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Start every worker and return when all are warm; raise
        :class:`WorkerStartFailed` (after stopping the others) if one cannot start."""
        try:
            await self._supervisor.start()
        except BaseException:
            await self.close()
            raise
        self._supervisor.serve()
        self._started = True
        self._life.move(Life.WARM)
        self._idle.watch()

    @property
    def ready(self) -> bool:
        """Whether calls are taken: at least one worker is warm, or the workers were let go
        while idle (the next call starts them again)."""
        alive = self._supervisor.alive
        return self._started and not self._life.stopping and (self._life.away or alive)

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
    def in_use(self) -> bool:
        """Whether a call waits or runs, a worker is starting or someone waits for warmth."""
        return self._idle.in_use

    async def release(self) -> None:
        """Let every worker go (the front process and the shared memory stay); the next call,
        or :meth:`warm_up`, starts them again. Nothing is let go while the pool is in use
        (:attr:`in_use`)."""
        if self._started:
            await self._idle.release()

    def wake(self) -> None:
        """Start the workers again if they were let go (returns at once)."""
        self._idle.wake()

    async def warm_up(self) -> None:
        """Start the workers if they were let go, and return once every slot that has not
        given up has a warm worker."""
        await self._idle.warm_up()

    @property
    def queue_depth(self) -> int:
        """Calls waiting for a worker."""
        return self._scheduler.depth

    @property
    def busy_workers(self) -> int:
        """Workers running a call now."""
        return self._supervisor.busy

    @property
    def available(self) -> bool:
        """Whether some slot still has, or is still trying to start, a worker; False once
        every slot gave up (calls are then answered ``skill-unavailable``)."""
        return self._scheduler.available

    @property
    def restarts(self) -> int:
        """Workers started again since the pool started (died, recycled, woken...)."""
        return self._supervisor.restarts

    def recycle_thresholds(self) -> list[int]:
        """Each slot's calls after which its current worker is recycled (0: never)."""
        return [slot.recycle_after for slot in self._supervisor.slots]

    @property
    def warm_workers(self) -> int:
        """How many workers are warm now (fewer than configured while one is replaced)."""
        return self._supervisor.warm

    def worker_pids(self) -> list[int]:
        """The process ids of the live workers."""
        return self._supervisor.pids()

    @property
    def encoder(self) -> EncoderRunning:
        """The encoder the warm workers run: what one of them said (a fallback to
        CTranslate2's own encoder first, with why), else the one :attr:`config` chooses."""
        said = self._supervisor.encoders()
        differing = [e for e in said if e.label != self.config.encoder.label]
        if differing or said:
            return (differing or said)[0]
        chosen = self.config.encoder
        return EncoderRunning(chosen.label, chosen.reason, chosen.precision_said)

    async def drain(self) -> None:
        """Refuse new calls; return when every queued and running call has its answer.
        From any state: a pool whose workers were let go has no call to wait for."""
        self._life.stop()
        await self._scheduler.wait_drained()

    async def close(self) -> None:
        """Stop the workers (calls still waiting get ``shutting-down``) and free the memory,
        from any state."""
        self._life.stop()
        self._started = False
        await self._idle.stop_watching()
        await self._supervisor.close()

    def kill_now(self) -> None:
        """Kill the workers and free the memory at once, waiting for nothing (a stop that
        cannot wait); the pool is not used again."""
        self._life.stop()
        self._started = False
        self._supervisor.kill_now()

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
        if self._life.stopping:
            raise ShuttingDown("the engine is shutting down and takes no new calls")
        if not self._started:
            raise NotReady("the workers are still loading the model")
        self._scheduler.check(clip, priority)
        self._idle.wake()
        try:
            return await self._scheduler.call(clip, language, deadline, request, priority)
        finally:
            self._idle.touch()
