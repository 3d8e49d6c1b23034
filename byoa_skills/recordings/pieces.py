"""A long recording cut on the voice activity detector into pieces of at most one window.

Silero (the VAD faster-whisper ships, imported when :func:`cut` runs) finds the speech; speech
chunks are split at a pause before they pass one window, and neighbouring chunks are joined
into one piece while the piece still fits in a window. A piece is a contiguous span of the
recording, so a time in a piece is the piece's start plus that time.

:func:`cut` takes a recording held whole; :class:`BlockCutter` takes one block by block and
holds a few windows of it at a time, whatever its length: the VAD runs on spans of
:data:`VAD_SPAN_SECONDS`, and each span's last speech chunks, which what follows could still
change, are looked at again at the start of the next.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from byoa_skills.pool.config import WINDOW_SECONDS
from byoa_skills.runtimes.speech.options import DecodeOptions
from byoa_skills.wav import SAMPLE_RATE

#: How much audio one VAD run of a :class:`BlockCutter` looks at, at least, in seconds (it
#: grows to three windows for longer windows).
VAD_SPAN_SECONDS = 60.0
#: The VAD's frame, in samples.
_VAD_FRAME = 512


@dataclass(frozen=True)
class Piece:
    """Samples ``start`` (inclusive) to ``end`` (exclusive) of a recording; ``index`` is its
    place in the recording's order."""

    index: int
    start: int
    end: int

    @property
    def frames(self) -> int:
        """Number of samples."""
        return self.end - self.start

    @property
    def offset_seconds(self) -> float:
        """Where the piece starts in the recording, in seconds."""
        return self.start / SAMPLE_RATE


def piece_seconds(encoder_seconds: float | None) -> float:
    """How long a piece may be for a model that encodes ``encoder_seconds`` of each window
    (None: the whole window): a piece that fits the short window is encoded in it, which is
    cheaper per second of speech than half-empty whole windows."""
    return min(WINDOW_SECONDS, encoder_seconds) if encoder_seconds else WINDOW_SECONDS


def cut(
    samples: np.ndarray,
    window_seconds: float = WINDOW_SECONDS,
    options: DecodeOptions | None = None,
) -> list[Piece]:
    """The pieces of ``samples`` (float32, 16 kHz, mono) that hold speech, in order, each at
    most ``window_seconds`` long; none when nothing is said. A recording that fits in one
    window is one piece, as a clip is (the worker's VAD then cuts its silence)."""
    window = int(window_seconds * SAMPLE_RATE)
    if samples.size == 0:
        return []
    if samples.size <= window:
        return [Piece(0, 0, int(samples.size))]
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    o = options or DecodeOptions()
    vad = VadOptions(
        threshold=o.vad_threshold,
        min_silence_duration_ms=o.vad_min_silence_ms,
        speech_pad_ms=o.vad_speech_pad_ms,
        max_speech_duration_s=window_seconds,
    )
    chunks = [(c["start"], c["end"]) for c in get_speech_timestamps(samples, vad)]
    return join_chunks(chunks, window)


def join_chunks(chunks: list[tuple[int, int]], window: int) -> list[Piece]:
    """Speech chunks ``(start, end)`` in order, joined into pieces of at most ``window``
    samples: a chunk joins the piece before it while the piece's span still fits; a chunk
    longer than a window (the VAD keeps them shorter) is split into windows."""
    joiner = _Joiner(window)
    spans = [span for start, end in chunks for span in joiner.add(start, end)]
    spans += joiner.close()
    return [Piece(index, start, end) for index, (start, end) in enumerate(spans)]


class _Joiner:
    """:func:`join_chunks` one chunk at a time: ``add`` gives the spans a chunk closes."""

    def __init__(self, window: int) -> None:
        self.window = window
        #: The span still open: the next chunk may join it.
        self.open: tuple[int, int] | None = None

    def add(self, start: int, end: int) -> list[tuple[int, int]]:
        closed: list[tuple[int, int]] = []
        while end - start > self.window:
            if self.open is not None:
                closed.append(self.open)
            self.open = (start, start + self.window)
            start += self.window
        if self.open is not None and end - self.open[0] <= self.window:
            self.open = (self.open[0], max(end, self.open[1]))
        else:
            if self.open is not None:
                closed.append(self.open)
            self.open = (start, end)
        return closed

    def close(self) -> list[tuple[int, int]]:
        closed, self.open = ([self.open] if self.open is not None else []), None
        return closed


class BlockCutter:
    """:func:`cut` for a recording of ``frames`` samples that arrives block by block.

    It holds at most about :data:`VAD_SPAN_SECONDS` and three windows of samples at a time
    (:attr:`most_held` says how many it held at most), and hands each piece on with its own
    copy of its samples as soon as no later audio can change it. A recording that fits in one
    window is one piece, as :func:`cut` makes it. Each VAD run starts afresh where the one
    before left its last chunks open, so a cut can differ slightly from one VAD run over the
    whole recording.
    """

    def __init__(
        self,
        frames: int,
        window_seconds: float = WINDOW_SECONDS,
        options: DecodeOptions | None = None,
        span_seconds: float = VAD_SPAN_SECONDS,
    ) -> None:
        self.frames = frames
        self.window = int(window_seconds * SAMPLE_RATE)
        self.span = max(int(span_seconds * SAMPLE_RATE), 3 * self.window)
        self.options = options or DecodeOptions()
        #: The most samples held at once (the pieces handed on not counted).
        self.most_held = 0

    def pieces(self, blocks: Iterable[np.ndarray]) -> Iterator[tuple[Piece, np.ndarray]]:
        """Each piece of the recording whose int16 samples ``blocks`` holds, in order, with
        its samples (int16)."""
        if self.frames <= self.window:
            whole = [np.asarray(block, dtype="<i2") for block in blocks]
            samples = np.concatenate(whole) if whole else np.zeros(0, dtype="<i2")
            self.most_held = max(self.most_held, len(samples))
            if len(samples):
                yield Piece(0, 0, len(samples)), samples
            return
        yield from self._cut(iter(blocks))

    def _cut(self, blocks: Iterator[np.ndarray]) -> Iterator[tuple[Piece, np.ndarray]]:
        from faster_whisper.vad import VadOptions

        o = self.options
        vad = VadOptions(
            threshold=o.vad_threshold,
            min_silence_duration_ms=o.vad_min_silence_ms,
            speech_pad_ms=o.vad_speech_pad_ms,
            max_speech_duration_s=self.window / SAMPLE_RATE,
        )
        pad = o.vad_speech_pad_ms * SAMPLE_RATE // 1000
        # a chunk that ends this far before a span's end is closed: what follows cannot
        # move its end (it needs this much silence after it, then its padding)
        settled = o.vad_min_silence_ms * SAMPLE_RATE // 1000 + 2 * pad + _VAD_FRAME
        joiner = _Joiner(self.window)
        held = np.zeros(0, dtype="<i2")
        held_from = scan_from = index = 0
        ended = False
        while True:
            parts = [held]
            end = held_from + len(held)
            while not ended and end - scan_from < self.span:
                block = next(blocks, None)
                if block is None:
                    ended = True
                else:
                    parts.append(np.asarray(block, dtype="<i2"))
                    end += len(block)
            held = np.concatenate(parts) if len(parts) > 1 else held
            self.most_held = max(self.most_held, len(held))
            chunks = _speech(held[scan_from - held_from :], vad, scan_from)
            if ended:
                final, scan_from = chunks, end
            else:
                open_at = next((i for i, c in enumerate(chunks) if c[1] > end - settled), None)
                final = chunks if open_at is None else chunks[:open_at]
                last_end = final[-1][1] if final else scan_from
                scan_from = max(last_end, end - pad) if open_at is None else chunks[open_at][0]
            spans = [span for start, stop in final for span in joiner.add(start, stop)]
            if ended:
                spans += joiner.close()
            for start, stop in spans:
                yield Piece(index, start, stop), held[start - held_from : stop - held_from].copy()
                index += 1
            if ended:
                return
            keep = scan_from if joiner.open is None else min(scan_from, joiner.open[0])
            held, held_from = held[keep - held_from :], keep


def _speech(samples: np.ndarray, vad: Any, offset: int) -> list[tuple[int, int]]:
    """The speech chunks of int16 ``samples`` (one VAD run), as samples from ``offset``."""
    from faster_whisper.vad import get_speech_timestamps

    audio = samples.astype(np.float32)
    audio *= np.float32(1.0 / 32768.0)
    found = get_speech_timestamps(audio, vad)
    return [(offset + c["start"], offset + c["end"]) for c in found]
