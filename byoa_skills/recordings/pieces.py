"""A long recording cut on the voice activity detector into pieces of at most one window.

Silero (the VAD faster-whisper ships, imported when :func:`cut` runs) finds the speech; speech
chunks are split at a pause before they pass one window, and neighbouring chunks are joined
into one piece while the piece still fits in a window. A piece is a contiguous span of the
recording, so a time in a piece is the piece's start plus that time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from byoa_skills.pool.config import WINDOW_SECONDS
from byoa_skills.runtimes.speech.options import DecodeOptions
from byoa_skills.wav import SAMPLE_RATE


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
    spans: list[tuple[int, int]] = []
    for start, end in chunks:
        while end - start > window:
            spans.append((start, start + window))
            start += window
        if spans and end - spans[-1][0] <= window:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return [Piece(index, start, end) for index, (start, end) in enumerate(spans)]
