"""Running a recording's pieces: several at once, answers handed on in the recording's order.

:func:`run_pieces` knows nothing of workers: it is given ``run_piece`` (the pool's
``transcribe`` for the local API, the model in this process for the CLI). The pieces come from
an iterator that decodes and cuts as it goes (:class:`byoa_skills.recordings.BlockCutter`): it
runs in a thread of its own, at most ``parallel`` pieces ahead of those running, so a
recording holds only the pieces running and those about to. When no language is given, the
first piece runs alone and the language it is heard in is used for every other piece, as
faster-whisper's own ``transcribe`` detects it once from the first window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from byoa_skills.pool.pool import Priority, WorkerPool
from byoa_skills.recordings.pieces import Piece
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
) -> list[tuple[Piece, Transcript]]:
    """Every piece with its answer, in order, with at most ``parallel`` pieces running at once
    and at most ``parallel`` more cut and waiting (``pieces`` is read in a thread).

    ``on_answer`` hears each answer in the pieces' order, as soon as it and all before it are
    known. The first failure (of a piece, or of ``pieces`` itself) stops the pieces still
    running, reads no more of ``pieces``, and is raised; so does a cancellation.
    """
    width = max(1, parallel)
    feed = _Feed(iter(pieces), ahead=width)
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
        feed.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return [(piece, answers[i]) for i, piece in enumerate(cut)]


class _Feed:
    """An iterator read in a thread of its own, at most ``ahead`` items before they are
    taken; closed in that thread."""

    def __init__(self, items: Iterator[CutPiece], ahead: int) -> None:
        self._items = items
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recording")
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
            future = loop.run_in_executor(self._thread, next, self._items, None)
            await self._ready.put(future)
            try:
                if await future is None:
                    return
            except Exception:  # the reader of the queue raises it
                return

    def close(self) -> None:
        """Read no more: the item being read now is the last; the iterator is closed after
        it, in its thread."""
        if self._reading is not None:
            self._reading.cancel()
        close = getattr(self._items, "close", None)
        if close is not None:
            self._thread.submit(close)
        self._thread.shutdown(wait=False)


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
