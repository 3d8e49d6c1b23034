"""A recording transcribed whole, on one road: decoded once to measure it, then decoded and
cut in bounded blocks while its pieces run, a few recordings at a time, and their answers
stitched in order.

Decoding, measuring and cutting run on the recordings' own threads
(:class:`~byoa_skills.recordings.work.RecordingWork`, one per recording in its turn), never
on the event loop's default executor, and stop at their next decoded frame when the
recording is stopped; a recording gives its turn back only once they have.

:class:`RecordingService` owns that road for the local API's OpenAI routes (the pieces on the
pool's workers, behind the sites' clips) and for ``byoa-skills transcribe`` (the pieces on a
model in this process). Its callers say what they want (:class:`RecordingOptions`) and get
a :class:`RecordingResult`, or a :class:`RecordingFailure` with a stable code; they never
see the pool, the runtime's options or their errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

import numpy as np

from byoa_skills.pool.errors import CallFailure
from byoa_skills.protocol.refusal import Refusal
from byoa_skills.recordings.decode import DEFAULT_MAX_SECONDS, AudioFile, open_audio
from byoa_skills.recordings.errors import RecordingError
from byoa_skills.recordings.gate import DEFAULT_AT_ONCE, RecordingGate
from byoa_skills.recordings.line import Place, UploadLine
from byoa_skills.recordings.memory import give_back_free_memory
from byoa_skills.recordings.pieces import BlockCutter, Piece, piece_seconds
from byoa_skills.recordings.runner import (
    CutPiece,
    PieceRunner,
    pool_parallel,
    pool_runner,
    run_pieces,
)
from byoa_skills.recordings.stitch import stitch
from byoa_skills.recordings.work import RecordingWork, Stop
from byoa_skills.runtimes.speech.base import Segment, Transcript
from byoa_skills.runtimes.speech.errors import RuntimeRefusal
from byoa_skills.runtimes.speech.options import DecodeRequest, Timestamps
from byoa_skills.wav import Clip

if TYPE_CHECKING:
    from byoa_skills.pool import WorkerPool
    from byoa_skills.runtimes.speech import SpeechBackend

log = logging.getLogger("byoa_skills.api")

#: What is asked of the speech: its text in its own language, or translated to English.
Task = Literal["transcribe", "translate"]
#: How often a running recording looks whether its client is still there, in seconds.
CLIENT_CHECK_SECONDS = 0.25
#: The skill every recording is counted under, in the metrics and in Activity alike: a
#: translation is the same skill with the task ``translate``.
SKILL = "audio.transcribe"
#: The outcome of a recording whose client left before its answer.
CLIENT_GONE = "client-gone"

#: ``on_measured(seconds)``: told the recording's length once it is decoded and measured,
#: before any piece runs.
MeasuredHook = Callable[[float], Awaitable[None]]
#: ``on_piece(piece, text)``: told each piece's text once every piece before it is answered.
PieceHook = Callable[[Piece, str], Awaitable[None]]
#: ``client_gone()``: whether whoever asked for the recording has left.
ClientCheck = Callable[[], bool]

_T = TypeVar("_T")


@dataclass(frozen=True)
class RecordingOptions:
    """What a recording's transcript is asked to be: its ``language`` (None: detected in the
    first piece), the ``task``, a ``prompt`` given to every piece, the ``temperature`` asked
    for (decoding stays at 0: the same file always gives the same text), and the
    ``timestamps`` its segments carry (``none``: text only, the sites' batched path)."""

    language: str | None = None
    task: Task = "transcribe"
    prompt: str | None = None
    temperature: float = 0.0
    timestamps: Timestamps = "none"

    def __post_init__(self) -> None:
        DecodeRequest(self.task, self.prompt, self.timestamps)  # raises ValueError when bad

    def decode_request(self) -> DecodeRequest:
        """What each piece's decoder is asked beyond the text."""
        return DecodeRequest(task=self.task, prompt=self.prompt, timestamps=self.timestamps)


@dataclass(frozen=True)
class RecordingResult:
    """A whole recording's transcript: its ``text``, its ``language`` (the one asked for, or
    the one heard in its first piece with speech), its ``duration`` in seconds, its segments
    (with words, when asked for) on the recording's timeline, and the ``pieces`` answered."""

    text: str
    language: str | None
    duration: float
    segments: tuple[Segment, ...] = ()
    pieces: int = 0


@dataclass
class RecordingProgress:
    """How far one recording got, kept up to date while it runs: its length once measured
    (None before), and the pieces answered."""

    seconds: float | None = None
    answered: int = 0


class RecordingFailure(Refusal):
    """A recording that was not transcribed: its file refused (``file-too-large``,
    ``audio-too-long``, ``audio-undecodable``) or a piece the workers or the model could not
    answer (the pool's or the runtime's stable code, e.g. ``queue-full``,
    ``deadline-exceeded``, ``unsupported-option``), with a one-line message."""


class ClientGone(Exception):
    """The client left before its answer: the recording is stopped, the pieces not yet
    running never run."""


class RecordingService:
    """Transcribes recordings of any length: at most ``at_once`` decoded at once (the others
    wait their turn, in arrival order, holding only their bytes), each at most
    ``max_seconds`` long, cut into pieces of at most one window (``window_seconds``), with
    ``parallel`` pieces running at once; the memory a recording used is given back to the
    system when it is done. Its decoding, measuring and cutting run on :attr:`work`
    (``at_once`` threads of its own). Made with :meth:`on_pool` or :meth:`in_process`."""

    def __init__(
        self,
        runner: Callable[[DecodeRequest], PieceRunner],
        *,
        model_name: str,
        window_seconds: float,
        parallel: int,
        max_seconds: float = DEFAULT_MAX_SECONDS,
        at_once: int = DEFAULT_AT_ONCE,
        ready: Callable[[], bool] = lambda: True,
        line: UploadLine | None = None,
    ) -> None:
        """``runner(request)`` gives the ``run_piece`` that answers one piece decoded as
        ``request`` asks; ``ready()`` says whether it can run pieces now; ``line`` bounds the
        uploads held before their turn (the defaults of :class:`UploadLine` when None)."""
        self._runner = runner
        self._ready = ready
        self.model_name = model_name
        self.window_seconds = window_seconds
        self.parallel = max(1, parallel)
        self.max_seconds = max_seconds
        self.gate = RecordingGate(at_once)
        #: The threads that decode, measure and cut: one per recording in its turn.
        self.work = RecordingWork(at_once)
        #: The uploads being received or waiting for their turn, bounded.
        self.line = line if line is not None else UploadLine()

    @classmethod
    def on_pool(
        cls,
        pool: WorkerPool,
        max_seconds: float = DEFAULT_MAX_SECONDS,
        at_once: int = DEFAULT_AT_ONCE,
        deadline: float | None = None,
        line: UploadLine | None = None,
    ) -> RecordingService:
        """Pieces on ``pool``'s workers as ``BULK`` calls (the sites' clips go first), as
        many at once as the workers' batches hold, each within ``deadline`` seconds (the
        pool's call deadline when None), cut to the pool's encoder window; uploads held
        before their turn bounded by ``line``."""
        return cls(
            lambda request: pool_runner(pool, request, deadline),
            model_name=pool.config.model_name,
            window_seconds=piece_seconds(pool.config.encoder_window),
            parallel=pool_parallel(pool),
            max_seconds=max_seconds,
            at_once=at_once,
            ready=lambda: pool.ready,
            line=line,
        )

    @classmethod
    def in_process(
        cls,
        backend: SpeechBackend,
        model_name: str,
        encoder_seconds: float | None = None,
        max_seconds: float = DEFAULT_MAX_SECONDS,
    ) -> RecordingService:
        """Pieces on ``backend`` in this process, one at a time (in a thread, so the next
        piece is cut meanwhile), cut to its encoder window (``encoder_seconds``; None: the
        whole window). Pieces run one after the other, so a language not given is the one
        heard in the first piece with speech, and kept for every piece after it."""
        return cls(
            lambda request: _backend_runner(backend, request),
            model_name=model_name,
            window_seconds=piece_seconds(encoder_seconds),
            parallel=1,
            max_seconds=max_seconds,
            at_once=1,
        )

    @property
    def ready(self) -> bool:
        """Whether pieces can run now (False while the pool's workers are loading)."""
        return self._ready()

    async def transcribe(
        self,
        data: bytes | AudioFile,
        options: RecordingOptions,
        *,
        on_measured: MeasuredHook | None = None,
        on_piece: PieceHook | None = None,
        client_gone: ClientCheck | None = None,
        progress: RecordingProgress | None = None,
        place: Place | None = None,
    ) -> RecordingResult:
        """The transcript of the audio file ``data`` (any format PyAV or libsndfile reads,
        decoded once to measure it; or a file :func:`open_audio` has already measured), once
        the gate gives it its turn.

        ``progress`` is kept up to date as it runs; ``on_measured`` hears its length before
        any piece runs, ``on_piece`` each piece's text in order. Raises
        :class:`RecordingFailure` with the code of what refused it, and :class:`ClientGone`
        as soon as ``client_gone()`` (looked at every :data:`CLIENT_CHECK_SECONDS`) says the
        client has left, or a hook raises it: the pieces not yet running then never run, and
        the decoding and cutting stop at their next frame before the turn is given back.

        ``place`` is the upload's place in :attr:`line`: it is left when the turn comes."""
        progress = progress if progress is not None else RecordingProgress()
        work = self._in_turn(data, options, progress, on_measured, on_piece, place)
        try:
            return await (work if client_gone is None else _unless(client_gone, work))
        except ClientGone:
            log.info("event=recording-client-gone pieces=%d", progress.answered)
            raise
        except (RecordingError, CallFailure, RuntimeRefusal) as failure:
            raise RecordingFailure(failure.code, failure.message) from None

    async def _in_turn(
        self,
        data: bytes | AudioFile,
        options: RecordingOptions,
        progress: RecordingProgress,
        on_measured: MeasuredHook | None,
        on_piece: PieceHook | None,
        place: Place | None,
    ) -> RecordingResult:
        gate = self.gate
        if gate.decoding >= gate.at_once:
            log.info(
                "event=recording-waits decoding=%d waiting=%d", gate.decoding, gate.waiting + 1
            )
        try:
            async with gate.turn():
                if place is not None:
                    place.leave()
                log.info(
                    "event=recording-starts decoding=%d waiting=%d", gate.decoding, gate.waiting
                )
                return await self._transcribed(data, options, progress, on_measured, on_piece)
        finally:
            if place is not None:
                place.leave()
            give_back_free_memory()

    async def _transcribed(
        self,
        data: bytes | AudioFile,
        options: RecordingOptions,
        progress: RecordingProgress,
        on_measured: MeasuredHook | None,
        on_piece: PieceHook | None,
    ) -> RecordingResult:
        audio = data
        if not isinstance(audio, AudioFile):
            raw, limit = audio, self.max_seconds
            audio = await self.work.run(lambda stop: open_audio(raw, limit, stop))
        progress.seconds = audio.seconds
        if on_measured is not None:
            await on_measured(audio.seconds)

        async def answered(piece: Piece, answer: Transcript) -> None:
            progress.answered += 1
            if on_piece is not None:
                await on_piece(piece, answer.text)

        run_piece = self._runner(options.decode_request())
        stop = Stop()
        done = await run_pieces(
            _pieces(audio, self.window_seconds, stop),
            run_piece,
            options.language,
            self.parallel,
            answered,
            work=self.work,
            stop=stop,
        )
        heard = stitch([p for p, _ in done], [a for _, a in done], audio.seconds, options.language)
        return RecordingResult(
            heard.text, heard.language, heard.duration, heard.segments, progress.answered
        )


def _pieces(audio: AudioFile, window: float, stop: Stop) -> Iterator[CutPiece]:
    """The pieces of ``audio`` with their samples, decoded and cut as they are read, the
    decoding stopped at its next frame once ``stop`` is set."""
    return BlockCutter(audio.frames, window).pieces(audio.blocks(stop=stop))


def _backend_runner(backend: SpeechBackend, request: DecodeRequest) -> PieceRunner:
    heard: list[str] = []  # the language of the first piece with speech, once heard

    def decode(samples: np.ndarray, language: str | None) -> Transcript:
        audio = Clip(samples).to_float32()
        if request.plain:
            return backend.transcribe(audio, language)
        return backend.transcribe_detailed(audio, language, request)

    async def run_piece(piece: Piece, samples: np.ndarray, language: str | None) -> Transcript:
        language = language or (heard[0] if heard else None)
        answer = await asyncio.to_thread(decode, samples, language)
        if not heard and answer.text and answer.language:
            heard.append(language or answer.language)
        return answer

    return run_piece


async def _unless(client_gone: ClientCheck, work: Awaitable[_T]) -> _T:
    """What ``work`` gives, or :class:`ClientGone` once ``client_gone()`` (``work`` is then
    cancelled)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=CLIENT_CHECK_SECONDS)
            if done:
                return task.result()
            if client_gone():
                raise ClientGone()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
