"""``accuracy``: the words the engine's decoding keeps, on the real speech of
tests/data/realspeech (73 clips, five languages, language given): the word error rate per
language with the whole 30 s window and beam 5 (faster-whisper's way) and with the engine's
windows, guard and decode choices, the difference per language, and how often the guard
decoded a clip again. In this process, one thread, one clip at a time."""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from byoa_skills.bench.clips import REAL_DIR
from byoa_skills.bench.context import Context, Skip
from byoa_skills.bench.scenarios.longform import word_errors

NAME = "accuracy"
TITLE = "Words kept on real speech, per language"
#: A quick run judges every this-many-th clip.
QUICK_STEP = 4
#: The goal: the engine's WER within this of the whole window's, per language.
WITHIN = 0.005


def run(ctx: Context) -> dict[str, Any]:
    """WER per language both ways, the difference, the guard's re-decodes, the seconds."""
    if ctx.settings.device == "cuda":
        raise Skip("accuracy is judged on the CPU")
    if not (REAL_DIR / "clips.json").is_file():
        raise Skip("no real-speech set (tests/data/realspeech)")
    import soundfile

    from byoa_skills.pool.config import DEFAULT_ENCODER_SECONDS, engine_decode_options
    from byoa_skills.runtimes.speech import DecodeOptions, load_backend

    records = json.loads((REAL_DIR / "clips.json").read_text(encoding="utf-8"))
    if ctx.settings.quick:
        records = records[::QUICK_STEP]
    audio = {}
    for record in records:
        samples, _ = soundfile.read(REAL_DIR / record["file"], dtype="float32")
        audio[record["file"]] = np.ascontiguousarray(samples)
    engine = engine_decode_options(DEFAULT_ENCODER_SECONDS, ctx.settings.model)
    ways = {"whole": DecodeOptions(), "engine": engine}
    ctx.reporter.start(NAME, len(ways))
    figures: dict[str, Any] = {"clips": len(records), "ways": {}}
    for way, options in ways.items():
        ctx.reporter.step(f"{len(records)} real clips, {way}")
        backend = load_backend(ctx.model_dir, model_name=ctx.settings.model, cpu_threads=1,
                               options=options)  # fmt: skip
        backend.transcribe(audio[records[0]["file"]], records[0]["language"])
        errors: dict[str, int] = defaultdict(int)
        total: dict[str, int] = defaultdict(int)
        how: Counter[str] = Counter()
        again = 0
        began = time.perf_counter()
        for record in records:
            if record["language"] not in backend.languages:
                continue
            answer = backend.transcribe(audio[record["file"]], record["language"])
            wrong, count = word_errors(record["text"], answer.text)
            errors[record["language"]] += wrong
            total[record["language"]] += count
            again += answer.attempts > 1
            how[f"{answer.window_seconds:g} s, beam {answer.beam_size}"] += 1
        seconds = time.perf_counter() - began
        figures["ways"][way] = {
            "wer": {n: errors[n] / total[n] for n in sorted(total)},
            "wer_all": sum(errors.values()) / max(1, sum(total.values())),
            "errors": dict(errors),
            "words": dict(total),
            "decoded_again": again,
            "decoded_again_rate": again / max(1, sum(how.values())),
            "answered_by": dict(how),
            "seconds": seconds,
        }
        ctx.reporter.advance()
    whole, engine = figures["ways"]["whole"]["wer"], figures["ways"]["engine"]["wer"]
    figures["engine_minus_whole"] = {n: engine[n] - whole[n] for n in whole}
    figures["within_goal"] = all(d <= WITHIN for d in figures["engine_minus_whole"].values())
    figures["goal"] = WITHIN
    return figures
