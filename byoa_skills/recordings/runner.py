"""Running a recording's pieces: several at once, answers handed on in the recording's order.

:func:`run_pieces` knows nothing of workers: it is given ``run_piece`` (the pool's
``transcribe`` for the local API, the model in this process for the CLI). The pieces come from
an iterator that decodes and cuts as it goes (:class:`byoa_skills.recordings.BlockCutter`): it
is read one piece at a time in the recordings' own threads
(:class:`~byoa_skills.recordings.work.RecordingWork`), at most ``parallel`` pieces ahead of
those running, so a recording holds only the pieces running and those about to. When the
pieces stop (a failure, or the recording cancelled) the piece being cut is stopped at its next
decoded frame, and :func:`run_pieces` returns only once it has. When no language is given, the
first piece runs alone and the language it is heard in is used for every other piece, as
faster-whisper's own ``transcribe`` detects it once from the first window.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Iterator

import numpy as np

from byoa_skills.pool.pool import Priority, WorkerPool
from byoa_skills.recordings.pieces import Piece
from byoa_skills.recordings.work import RecordingWork, Stop, until_done
from byoa_skills.runtimes.speech.base import Transcript
from byoa_skills.runtimes.speech.options import DecodeRequest
from byoa_skills.wav import Clip

#: ``run_piece(piece, samples, language)``: the piece's answer (``language`` None: detect it).
PieceRunner = Callable[[Piece, np.ndarray, "str | None"], Awaitable[Transcript]]
#: ``on_answer(piece, answer)``: told of each answer once every piece before it is answered.
AnswerHook = Callable[[Piece, Transcript], Awaitable[None]]
#: A piece and its int16 samples.
CutPiece = tuple[Piece, np.ndarray]


async def run_pieces(
    pieces: Iterable[CutPiece],
    run_piece: PieceRunner,
    language: str | None,
    parallel: int,
    on_answer: AnswerHook | None = None,
    *,
    work: RecordingWork | None = None,
    stop: Stop | None = None,
) -> list[tuple[Piece, Transcript]]:
    """Every piece with its answer, in order, with at most ``parallel`` pieces running at once
    and at most ``parallel`` more cut and waiting (``pieces`` is read on ``work``'s threads,
    or a thread of its own when None).

    ``on_answer`` hears each answer in the pieces' order, as soon as it and all before it are
    known. The first failure (of a piece, or of ``pieces`` itself) stops the pieces still
    running, reads no more of ``pieces``, and is raised; so does a cancellation. Either way
    ``stop`` (the one ``pieces`` looks at while it decodes and cuts) is set, and this returns
    or raises only once the piece being read has stopped.
    """
    width = max(1, parallel)
    own = work is None
    feed = _Feed(iter(pieces), ahead=width, work=work or RecordingWork(1), stop=stop or Stop())
    cut: list[Piece] = []
    answers: dict[int, Transcript] = {}
    told = 0
    telling = asyncio.Lock()

    async def tell() -> None:
        nonlocal told
        async with telling:
            while told < len(cut) and told in answers:
                if on_answer is not None:
                    await on_answer(cut[told], answers[told])
                told += 1

    slots = asyncio.Semaphore(width)
    tasks: list[asyncio.Task[None]] = []
    failed: list[BaseException] = []

    async def one(position: int, piece: Piece, samples: np.ndarray, heard: str | None) -> None:
        try:
            answers[position] = await run_piece(piece, samples, heard)
            await tell()
        except BaseException as error:
            failed.append(error)
            raise
        finally:
            slots.release()

    try:
        first = await feed.next()
        if first is not None and language is None:
            cut.append(first[0])
            answers[0] = await run_piece(first[0], first[1], None)
            language = answers[0].language if answers[0].text else None
            await tell()
            first = await feed.next()
        item = first
        while item is not None and not failed:
            await slots.acquire()
            if failed:
                slots.release()
                break
            cut.append(item[0])
            tasks.append(asyncio.create_task(one(len(cut) - 1, item[0], item[1], language)))
            del item
            item = await feed.next()
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await feed.close()
        if own:
            feed.work.close()
    return [(piece, answers[i]) for i, piece in enumerate(cut)]


class _Feed:
    """An iterator read one item at a time on ``work``, at most ``ahead`` items before they
    are taken; ``stop`` is the flag the iterator looks at while it reads."""

    def __init__(
        self, items: Iterator[CutPiece], ahead: int, work: RecordingWork, stop: Stop
    ) -> None:
        self._items = items
        self.work = work
        self._stop = stop
        self._ready: asyncio.Queue[asyncio.Future[CutPiece | None]] = asyncio.Queue(ahead)
        self._reading: asyncio.Task[None] | None = None

    async def next(self) -> CutPiece | None:
        """The next item, None after the last; raises what reading it raised."""
        if self._reading is None:
            self._reading = asyncio.create_task(self._read())
        return await (await self._ready.get())

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            future: asyncio.Future[CutPiece | None] = loop.create_future()
            await self._ready.put(future)
            try:
                item = await self.work.run(self._next, self._stop)
            except asyncio.CancelledError:
                future.cancel()
                raise
            except Exception as error:  # the reader of the queue raises it
                future.set_exception(error)
                return
            future.set_result(item)
            if item is None:
                return

    def _next(self, stop: Stop) -> CutPiece | None:
        return next(self._items, None)

    async def close(self) -> None:
        """Read no more: the item being read is stopped at its next step, and this returns
        once it has; the iterator is then closed on ``work``."""
        self._stop.set()
        cancelled = False
        if self._reading is not None:
            self._reading.cancel()
            cancelled = await until_done(self._reading)
            if not self._reading.cancelled():
                self._reading.exception()
        while not self._ready.empty():  # what was read ahead and never taken
            left = self._ready.get_nowait()
            if left.done() and not left.cancelled():
                left.exception()
        close = getattr(self._items, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await self.work.run(lambda _: close())
        if cancelled:
            raise asyncio.CancelledError()


def pool_runner(
    pool: WorkerPool,
    request: DecodeRequest,
    deadline: float | None = None,
) -> PieceRunner:
    """A ``run_piece`` that sends each piece to ``pool`` as a ``BULK`` call (sites' clips go
    first, and keep their own places in the queue), within each piece's ``deadline`` (the
    pool's default when None)."""

    async def run_piece(piece: Piece, samples: np.ndarray, language: str | None) -> Transcript:
        answer = await pool.transcribe(
            Clip(samples), language, deadline, request=request, priority=Priority.BULK
        )
        return answer.transcript

    return run_piece


def pool_parallel(pool: WorkerPool) -> int:
    """How many pieces to keep in the pool at once: enough to fill every worker's batch."""
    return max(1, pool.config.workers * max(1, pool.config.max_batch))
