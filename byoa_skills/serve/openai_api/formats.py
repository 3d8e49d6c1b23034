"""The answer's formats: ``json``, ``text``, ``verbose_json``, ``srt`` and ``vtt``, as
OpenAI writes them."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from byoa_skills.recordings import RecordingResult, Task, srt, vtt

#: The formats an answer may be asked in (``response_format``).
RESPONSE_FORMATS = ("json", "text", "verbose_json", "srt", "vtt")


def answer(heard: RecordingResult, response_format: str, task: Task) -> web.Response:
    """The whole answer to one recording in ``response_format`` (one of
    :data:`RESPONSE_FORMATS`); ``json`` and ``verbose_json`` carry the seconds heard as
    ``usage``."""
    if response_format == "text":
        return web.Response(text=heard.text + "\n", content_type="text/plain")
    if response_format == "srt":
        return web.Response(text=srt(heard.segments), content_type="text/plain")
    if response_format == "vtt":
        return web.Response(text=vtt(heard.segments), content_type="text/vtt")
    usage = {"type": "duration", "seconds": round(heard.duration, 3)}
    if response_format == "json":
        return web.json_response({"text": heard.text, "usage": usage})
    return web.json_response(verbose_json(heard, task) | {"usage": usage})


def verbose_json(heard: RecordingResult, task: str) -> dict[str, Any]:
    """The ``verbose_json`` body: the text, the language code, the duration, the segments
    and, when word timestamps were decoded, every word on the recording's timeline."""
    segments = [
        {
            "id": number,
            "seek": round(s.start * 100),
            "start": s.start,
            "end": s.end,
            "text": s.text,
            "tokens": list(s.tokens),
            "temperature": 0.0,
            "avg_logprob": s.avg_logprob,
            "compression_ratio": s.compression_ratio,
            "no_speech_prob": s.no_speech_prob,
        }
        for number, s in enumerate(heard.segments)
    ]
    body: dict[str, Any] = {
        "task": task,
        "language": heard.language or "",
        "duration": round(heard.duration, 3),
        "text": heard.text,
        "segments": segments,
    }
    words = [w for s in heard.segments for w in s.words]
    if words:
        body["words"] = [{"word": w.word.strip(), "start": w.start, "end": w.end} for w in words]
    return body
