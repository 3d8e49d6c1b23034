"""Where a recording's decoding, measuring and cutting run: threads of the recordings' own,
never the event loop's default executor (the store's reads and the wallet's use that one),
each job stoppable.

A job is a function that takes a :class:`Stop` and looks at it between bounded steps (a
decoded frame, a block, one VAD span): :meth:`RecordingWork.run` sets it when the coroutine
that waits for the job is cancelled (its client left), and returns only once the job has
ended, so a recording that gives up its turn has stopped working first. A job that has not
started yet never starts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")


class Stopped(Exception):
    """A job asked to stop: raised from :meth:`Stop.check` at the job's next step."""


class Stop:
    """A flag one job looks at between its steps; set from any thread."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        """Ask the job to stop at its next step."""
        self._event.set()

    @property
    def asked(self) -> bool:
        """Whether the job was asked to stop."""
        return self._event.is_set()

    def check(self) -> None:
        """Raise :class:`Stopped` when the job was asked to stop; return at once otherwise."""
        if self._event.is_set():
            raise Stopped()


class RecordingWork:
    """At most ``threads`` recording jobs at once, in threads of their own (named
    ``recording_N``); the others wait in the order they were given. :attr:`running` says how
    many run now."""

    def __init__(self, threads: int) -> None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a whole number of at least 1, got {threads!r}")
        self.threads = threads
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="recording"
        )
        self._lock = threading.Lock()
        self._running = 0

    @property
    def running(self) -> int:
        """Jobs running in the threads now (a job asked to stop counts until it has ended)."""
        with self._lock:
            return self._running

    async def run(self, job: Callable[[Stop], _T], stop: Stop | None = None) -> _T:
        """What ``job(stop)`` returns, run in one of the threads (``stop``: a new one when
        None). Raises what the job raises. When the caller is cancelled, ``stop`` is set and
        the cancellation is raised once the job has ended (a job not started never starts),
        however many times the caller is cancelled meanwhile."""
        stop = stop if stop is not None else Stop()
        future = self._executor.submit(self._counted, job, stop)
        waiting = asyncio.wrap_future(future)
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            stop.set()
            future.cancel()  # one that has not started yet never runs
            await until_done(waiting)
            if not waiting.cancelled():
                waiting.exception()  # looked at: it is the stopped job's, nobody else's
            raise

    def _counted(self, job: Callable[[Stop], _T], stop: Stop) -> _T:
        with self._lock:
            self._running += 1
        try:
            stop.check()
            return job(stop)
        finally:
            with self._lock:
                self._running -= 1

    def close(self) -> None:
        """Take no more jobs; the ones running end on their own (or when stopped)."""
        self._executor.shutdown(wait=False, cancel_futures=True)


async def until_done(waiting: asyncio.Future[_T]) -> bool:
    """Return once ``waiting`` is done, whatever it gave (it is neither cancelled nor looked
    at), however often the caller is cancelled meanwhile; whether it was."""
    cancelled = False
    while not waiting.done():
        try:
            await asyncio.wait({waiting})
        except asyncio.CancelledError:
            cancelled = True
    return cancelled
