"""A transcript as subtitles: SubRip (``.srt``) and WebVTT (``.vtt``), one cue per segment."""

from __future__ import annotations

from collections.abc import Sequence

from byoa_skills.runtimes.speech.base import Segment


def srt(segments: Sequence[Segment]) -> str:
    """SubRip: numbered cues, ``HH:MM:SS,mmm --> HH:MM:SS,mmm``, a blank line after each."""
    cues = [
        f"{number}\n{_time(s.start, ',')} --> {_time(s.end, ',')}\n{s.text.strip()}\n"
        for number, s in enumerate(segments, start=1)
    ]
    return "\n".join(cues)


def vtt(segments: Sequence[Segment]) -> str:
    """WebVTT: the ``WEBVTT`` header, then ``HH:MM:SS.mmm --> HH:MM:SS.mmm`` cues."""
    cues = [f"{_time(s.start, '.')} --> {_time(s.end, '.')}\n{s.text.strip()}\n" for s in segments]
    return "\n".join(["WEBVTT\n", *cues])


def _time(seconds: float, separator: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    whole, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{whole:02d}{separator}{millis:03d}"
