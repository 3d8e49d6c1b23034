"""A slot: one place for a worker, with the shared memory its calls' samples are written to
and what the scheduler and the supervisor read about it.

A slot outlives its workers: when one dies, is recycled or let go, the next one starts in
the same slot, with the same shared memory.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from multiprocessing.shared_memory import SharedMemory

import numpy as np

from byoa_skills.pool.calls import Call
from byoa_skills.pool.worker import WorkerProcess


@dataclass
class Slot:
    """One worker's place; only the supervisor replaces its worker."""

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
    #: It waits in :meth:`Scheduler.next_call` for a call, with a warm worker.
    waiting: bool = False
    #: Lone calls another slot took from the queue and handed to this (wide) one.
    handed: asyncio.Queue[Call] = field(default_factory=asyncio.Queue, repr=False)
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    @classmethod
    def open(cls, index: int, size: int, wide: bool) -> Slot:
        """A slot with ``size`` bytes of new shared memory for its calls' int16 samples."""
        shm = SharedMemory(create=True, size=size)
        samples = np.ndarray((size // 2,), dtype="<i2", buffer=shm.buf)
        return cls(index, shm, samples, wide=wide)

    @property
    def warm(self) -> bool:
        """Whether its worker has loaded the model, warmed up and not ended."""
        return self.worker is not None and self.worker.warm

    @property
    def alive(self) -> bool:
        """Whether it has a worker whose process has not ended."""
        return self.worker is not None and self.worker.alive

    def free(self) -> None:
        """Free the shared memory (its worker must have ended)."""
        del self.samples
        self.shm.close()
        with contextlib.suppress(FileNotFoundError):
            self.shm.unlink()
