"""``wav``: parsing and decoding a clip from base64 and from bytes, against ``soundfile``."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any

from byoa_skills.bench.clips import LABELS, wav_bytes
from byoa_skills.bench.context import Context
from byoa_skills.bench.stats import summarize
from byoa_skills.wav import clip_from_skill_input, parse_wav

NAME = "wav"
TITLE = "WAV parsing"


def _time_each(function: Callable[[], object], loops: int) -> list[float]:
    times = []
    for _ in range(loops):
        began = time.perf_counter()
        function()
        times.append(time.perf_counter() - began)
    return times


def _measure(function: Callable[[], object], loops: int, rounds: int) -> dict[str, float]:
    function()
    groups = [_time_each(function, loops) for _ in range(rounds)]
    stats = summarize([x for g in groups for x in g], groups).to_dict()
    return {k: (v * 1e6 if k not in ("n", "spread") else v) for k, v in stats.items()}


def run(ctx: Context) -> dict[str, Any]:
    """Microseconds per parse of each clip length, by each reader."""
    try:
        import soundfile
    except ImportError:
        soundfile = None
        ctx.reporter.note("wav: soundfile is not installed; its row is left out")
    loops, rounds = ctx.settings.wav_loops, ctx.settings.rounds
    readers = ["base64", "bytes"] + (["soundfile"] if soundfile else [])
    ctx.reporter.start(NAME, len(LABELS) * len(readers))
    figures: dict[str, Any] = {"unit": "us", "rows": {}}
    for label in LABELS:
        data = wav_bytes(ctx.clips[label])
        skill_input = {"audio": {"mime": "audio/wav", "base64": base64.b64encode(data).decode()}}
        row: dict[str, Any] = {}
        ctx.reporter.step(f"{label} from base64")
        row["base64"] = _measure(lambda s=skill_input: clip_from_skill_input(s), loops, rounds)
        ctx.reporter.advance()
        ctx.reporter.step(f"{label} from bytes")
        row["bytes"] = _measure(lambda d=data: parse_wav(d).samples, loops, rounds)
        ctx.reporter.advance()
        if soundfile:
            import io

            ctx.reporter.step(f"{label} soundfile.read")
            row["soundfile"] = _measure(
                lambda d=data: soundfile.read(io.BytesIO(d), dtype="int16"), loops, rounds
            )
            ctx.reporter.advance()
        figures["rows"][label] = row
    figures["soundfile"] = soundfile is not None
    return figures
