"""Running a recording's pieces: several at once, answers handed on in the recording's order.

:func:`run_pieces` knows nothing of workers: it is given ``run_piece`` (the pool's
``transcribe`` for the local API, the model in this process for the CLI). When no language is
given, the first piece runs alone and the language it is heard in is used for every other
piece, as faster-whisper's own ``transcribe`` detects it once from the first window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from byoa_skills.pool.errors import QueueFull
from byoa_skills.pool.pool import Priority, WorkerPool
from byoa_skills.recordings.pieces import Piece
from byoa_skills.runtimes.speech.base import Transcript
from byoa_skills.runtimes.speech.options import DecodeRequest
from byoa_skills.wav import Clip

#: ``run_piece(piece, language)``: the piece's answer (``language`` None: detect it).
PieceRunner = Callable[[Piece, "str | None"], Awaitable[Transcript]]
#: ``on_answer(piece, answer)``: told of each answer once every piece before it is answered.
AnswerHook = Callable[[Piece, Transcript], Awaitable[None]]
#: How long a piece refused ``queue-full`` waits before it asks again, in seconds.
QUEUE_RETRY_SECONDS = 0.2


async def run_pieces(
    pieces: Sequence[Piece],
    run_piece: PieceRunner,
    language: str | None,
    parallel: int,
    on_answer: AnswerHook | None = None,
) -> list[Transcript]:
    """Every piece's answer, in order, with at most ``parallel`` pieces running at once.

    ``on_answer`` hears each answer in the pieces' order, as soon as it and all before it are
    known. The first failure cancels the pieces still running and is raised.
    """
    answers: dict[int, Transcript] = {}
    told = 0
    telling = asyncio.Lock()

    async def tell() -> None:
        nonlocal told
        async with telling:
            while told < len(pieces) and told in answers:
                if on_answer is not None:
                    await on_answer(pieces[told], answers[told])
                told += 1

    rest = list(pieces)
    if language is None and rest:
        first = rest.pop(0)
        answers[0] = await run_piece(first, None)
        language = answers[0].language if answers[0].text else None
        await tell()
    slots = asyncio.Semaphore(max(1, parallel))

    async def one(position: int, piece: Piece) -> None:
        async with slots:
            answers[position] = await run_piece(piece, language)
        await tell()

    offset = len(pieces) - len(rest)
    tasks = [asyncio.create_task(one(offset + i, piece)) for i, piece in enumerate(rest)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return [answers[i] for i in range(len(pieces))]


def pool_runner(
    pool: WorkerPool,
    samples: Clip,
    request: DecodeRequest,
    deadline: float | None = None,
) -> PieceRunner:
    """A ``run_piece`` that sends each piece of ``samples`` to ``pool`` as a ``BULK`` call
    (sites' clips go first), asking again while the queue is full, within each piece's
    ``deadline`` (the pool's default when None)."""

    async def run_piece(piece: Piece, language: str | None) -> Transcript:
        clip = Clip(samples.samples[piece.start : piece.end])
        loop = asyncio.get_running_loop()
        give_up = loop.time() + (pool.config.default_deadline if deadline is None else deadline)
        while True:
            try:
                left = max(0.001, give_up - loop.time())
                answer = await pool.transcribe(
                    clip, language, left, request=request, priority=Priority.BULK
                )
                return answer.transcript
            except QueueFull:
                if loop.time() + QUEUE_RETRY_SECONDS >= give_up:
                    raise
                await asyncio.sleep(QUEUE_RETRY_SECONDS)

    return run_piece


def pool_parallel(pool: WorkerPool) -> int:
    """How many pieces to keep in the pool at once: enough to fill every worker's batch."""
    return max(1, pool.config.workers * max(1, pool.config.max_batch))
