"""The pieces' answers put back together in order: one text, and segments and words whose
times are seconds from the recording's start."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from byoa_skills.recordings.pieces import Piece
from byoa_skills.runtimes.speech.base import Segment, Transcript


@dataclass(frozen=True)
class LongTranscript:
    """What was heard in a whole recording: ``text``, the language (the one asked for, or the
    one detected in its first piece with speech), its ``duration`` in seconds, and segments
    (with words, when asked for) on the recording's timeline."""

    text: str
    language: str | None
    duration: float
    segments: tuple[Segment, ...] = ()


def join_text(texts: Sequence[str]) -> str:
    """The pieces' texts, in order, one space between them, empty ones left out."""
    return " ".join(text.strip() for text in texts if text.strip())


def stitch(
    pieces: Sequence[Piece],
    answers: Sequence[Transcript],
    duration: float,
    language: str | None = None,
) -> LongTranscript:
    """The recording's transcript from each piece's answer (``answers[i]`` is ``pieces[i]``'s):
    the texts joined in order, each segment and word moved by its piece's start."""
    segments: list[Segment] = []
    for piece, answer in zip(pieces, answers, strict=True):
        segments.extend(shifted(segment, piece.offset_seconds) for segment in answer.segments)
    heard = language or next((a.language for a in answers if a.text and a.language), None)
    return LongTranscript(
        text=join_text([answer.text for answer in answers]),
        language=heard,
        duration=duration,
        segments=tuple(segments),
    )


def shifted(segment: Segment, seconds: float) -> Segment:
    """``segment`` and its words, ``seconds`` later."""
    words = tuple(
        replace(w, start=round(w.start + seconds, 3), end=round(w.end + seconds, 3))
        for w in segment.words
    )
    return replace(
        segment,
        start=round(segment.start + seconds, 3),
        end=round(segment.end + seconds, 3),
        words=words,
    )
