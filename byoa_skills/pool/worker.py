"""One worker process, seen from the parent: start it, wait until it is ready, run a job.

The parent notices a worker's death through its process sentinel and its pipe, both
watched by the event loop: nothing polls. A worker ends with its parent, even one killed
with SIGKILL (:func:`~byoa_skills.pool.worker_main.run_worker` asks the kernel for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
from multiprocessing.connection import Connection

from byoa_skills.pool.config import PoolConfig
from byoa_skills.pool.errors import WorkerStartFailed
from byoa_skills.pool.messages import (
    Answer,
    Answers,
    EncoderRunning,
    FromWorker,
    Job,
    Ready,
    StartFailed,
    Stop,
)
from byoa_skills.pool.worker_main import run_worker

_SPAWN = multiprocessing.get_context("spawn")
#: Set for the workers unless already set: numpy's OpenBLAS (the mel filters of each clip)
#: on one thread. By default it keeps a thread of its own per core in each worker, which
#: took about a tenth of a busy worker's CPU from the model on 2 cores.
WORKER_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1"}


class WorkerDied(Exception):
    """The worker process ended while the parent waited for it."""


class WorkerProcess:
    """A spawned worker process and the futures of what the parent waits for from it."""

    def __init__(self, config: PoolConfig, shm_name: str, name: str, wide: bool = False) -> None:
        """Spawn the worker; ``wide``: it also keeps an encoder on ``config.wide_threads``
        threads for lone calls."""
        self._config = config
        self._loop = asyncio.get_running_loop()
        for name, value in WORKER_ENVIRONMENT.items():  # a spawned child takes os.environ
            os.environ.setdefault(name, value)
        parent_end, child_end = _SPAWN.Pipe(duplex=True)
        self._conn: Connection = parent_end
        self._process = _SPAWN.Process(
            target=run_worker,
            args=(child_end, config, shm_name, wide, os.getpid()),
            name=name,
            daemon=True,
        )
        self._process.start()
        self._pid = self._process.pid
        child_end.close()
        self._ready: asyncio.Future[float] = self._loop.create_future()
        self._job: tuple[int, asyncio.Future[tuple[Answer, ...]]] | None = None
        self._exited = asyncio.Event()
        self.rss_mib = 0.0
        #: The encoder the worker said it runs once ready (empty before).
        self.encoder = EncoderRunning("", "")
        self._loop.add_reader(self._conn.fileno(), self._on_readable)
        self._loop.add_reader(self._process.sentinel, self._on_exit)

    @property
    def pid(self) -> int | None:
        """The worker's process id."""
        return self._pid

    @property
    def warm(self) -> bool:
        """Whether the worker has loaded its model, warmed up and not ended."""
        ready = self._ready
        return ready.done() and not ready.cancelled() and ready.exception() is None and self.alive

    @property
    def alive(self) -> bool:
        """Whether the process has not ended."""
        return not self._exited.is_set()

    async def wait_ready(self) -> None:
        """Return when the worker has loaded its model and warmed up; raise
        :class:`WorkerStartFailed` if it fails, dies or takes longer than the start timeout."""
        try:
            self.rss_mib = await asyncio.wait_for(
                asyncio.shield(self._ready), self._config.start_timeout
            )
        except asyncio.TimeoutError:
            self.kill()
            raise WorkerStartFailed(f"no ready within {self._config.start_timeout:g} s") from None

    async def run(self, job: Job) -> tuple[Answer, ...]:
        """Send ``job`` (one clip or a batch) whose samples are already in the shared block;
        return one answer per clip, in order.

        Raises :class:`WorkerDied` if the process ends first. Cancelling leaves the worker
        busy: the caller must kill it.
        """
        future: asyncio.Future[tuple[Answer, ...]] = self._loop.create_future()
        self._job = (job.id, future)
        try:
            self._conn.send(job)
        except (OSError, ValueError) as error:
            self._job = None
            raise WorkerDied(f"the pipe to the worker is closed: {error}") from None
        try:
            return await future
        finally:
            self._job = None

    async def wait_exit(self) -> None:
        """Return when the process has ended."""
        await self._exited.wait()

    def kill(self) -> None:
        """End the process at once (SIGKILL)."""
        if self.alive and self._process.is_alive():
            self._process.kill()

    async def stop(self) -> None:
        """Ask the worker to finish and end; SIGTERM, then SIGKILL after the grace period."""
        if self.alive:
            with contextlib.suppress(OSError, ValueError):
                self._conn.send(Stop())
        for escalate in (self._terminate, self.kill):
            try:
                await asyncio.wait_for(self._exited.wait(), self._config.stop_grace)
                break
            except asyncio.TimeoutError:
                escalate()
        await self._exited.wait()

    def _terminate(self) -> None:
        if self.alive and self._process.is_alive() and self._pid:
            self._process.terminate()

    def _on_readable(self) -> None:
        try:
            while self._conn.poll():
                self._dispatch(self._conn.recv())
        except (EOFError, OSError):
            self._loop.remove_reader(self._conn.fileno())

    def _dispatch(self, message: FromWorker) -> None:
        if isinstance(message, Ready) and not self._ready.done():
            self.encoder = EncoderRunning(
                message.encoder,
                message.encoder_reason,
                message.encoder_precision,
                message.kernels,
                message.vad,
            )
            self._ready.set_result(message.rss_mib)
        elif isinstance(message, StartFailed) and not self._ready.done():
            self._ready.set_exception(WorkerStartFailed(message.message))
        elif isinstance(message, Answers) and self._job and self._job[0] == message.job_id:
            self.rss_mib = message.rss_mib
            if not self._job[1].done():
                self._job[1].set_result(message.answers)

    def _on_exit(self) -> None:
        self._loop.remove_reader(self._process.sentinel)
        self._on_readable()  # an answer sent just before the end still counts
        with contextlib.suppress(OSError, ValueError):
            self._loop.remove_reader(self._conn.fileno())
        self._process.join(0)
        code = self._process.exitcode
        if code is None:
            how = "its pipes closed"
        elif code < 0:
            how = f"signal {signal.Signals(-code).name}"
        else:
            how = f"exit {code}"
        error = WorkerDied(f"worker {self._process.name} (pid {self.pid}) ended: {how}")
        if not self._ready.done():
            self._ready.set_exception(WorkerStartFailed(str(error)))
        if self._job and not self._job[1].done():
            self._job[1].set_exception(error)
        self._exited.set()
        self._conn.close()
        self._close_when_reaped()

    def _close_when_reaped(self) -> None:
        """Close the process's sentinel pipe now, not whenever the object is collected. Its
        pipes can close a moment before the process can be reaped: then look again soon."""
        self._process.join(0)
        if self._process.exitcode is None:
            self._loop.call_later(0.05, self._close_when_reaped)
            return
        self._process.close()
