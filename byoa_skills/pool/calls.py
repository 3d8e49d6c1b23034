"""What a call to the pool is, and its answer: the clip with its deadline and priority, the
future its caller waits on, and the :class:`Transcription` that answers it.

A call is answered once: :func:`fail` and a result never overwrite an answer already given.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import IntEnum

from byoa_skills.pool.errors import CallFailure, ShuttingDown, SkillUnavailable
from byoa_skills.runtimes.speech.base import Transcript
from byoa_skills.runtimes.speech.options import DecodeRequest
from byoa_skills.wav import Clip


class Priority(IntEnum):
    """Which waiting calls a free worker takes first: sites' clips (``SITE``) before the
    pieces of the visitor's long recordings (``BULK``); calls of one priority in order.
    Each priority has its own places in the queue (:class:`~byoa_skills.pool.WorkerPool`)."""

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

    @property
    def handoff_seconds(self) -> float:
        """The time the pool took around the model: the samples into shared memory, the job
        and the answers over the worker's pipe (the answer's time less the queue and the
        model)."""
        return max(0.0, self.seconds - self.queued_seconds - self.inference_seconds)


@dataclass
class Call:
    """One clip waiting for, or running on, a worker."""

    clip: Clip
    language: str | None
    #: Monotonic times: when it arrived, and when it must be answered.
    arrived: float
    deadline: float
    future: asyncio.Future[Transcription]
    #: When a worker took it (None: still waiting).
    started: float | None = None
    #: Its caller stopped waiting before a worker took it: it never runs.
    abandoned: bool = False
    request: DecodeRequest = field(default_factory=DecodeRequest)
    priority: Priority = Priority.SITE
    #: Arrival order, for calls of the same priority.
    order: int = 0

    def __lt__(self, other: Call) -> bool:  # the queue's order
        return (self.priority, self.order) < (other.priority, other.order)


class CallQueue(asyncio.PriorityQueue[Call]):
    """The calls waiting for a worker, the highest priority first, with how many of each
    priority wait; ``room`` is set each time a ``BULK`` call leaves."""

    def _init(self, maxsize: int) -> None:
        super()._init(maxsize)
        self.waiting: dict[Priority, int] = dict.fromkeys(Priority, 0)
        self.room = asyncio.Event()

    def _put(self, item: Call) -> None:
        super()._put(item)
        self.waiting[item.priority] += 1

    def _get(self) -> Call:
        item = super()._get()
        self.waiting[item.priority] -= 1
        if item.priority == Priority.BULK:
            self.room.set()
        return item


def fail(call: Call, failure: CallFailure) -> None:
    """Answer ``call`` with ``failure`` unless it has its answer already."""
    if not call.future.done():
        call.future.set_exception(failure)
        call.future.exception()  # retrieved here: a caller that gave up may never read it


def unavailable() -> SkillUnavailable:
    """The failure of a call no worker can ever run: every slot gave up."""
    return SkillUnavailable("no speech worker can start here; see the engine's log")


def shutting_down() -> ShuttingDown:
    """The failure of a call the pool will not run because it stops."""
    return ShuttingDown("the engine is shutting down")
