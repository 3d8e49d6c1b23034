"""``longform``: a long recording of real speech (the English clips of tests/data/realspeech
joined with pauses to five minutes, tests/data/realspeech/longform-en.json) through the engine's
OpenAI-compatible API, cut into pieces that run on every worker at once, against
faster-whisper's own ``transcribe`` and its ``BatchedInferencePipeline`` called directly on
the same machine with all its cores. Also: the words each heard (word error rate against what
was said, and between the engine and ``transcribe``), and the latency of sites' 1 s clips
while the long job runs, next to their latency on an idle engine."""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from byoa_skills.bench.clips import REAL_DIR, skill_body, speech_dir
from byoa_skills.bench.context import Context, Skip
from byoa_skills.bench.server import EngineProcess, json_body, post_transcription, start_engine
from byoa_skills.wav import SAMPLE_RATE, parse_wav, wav_from_int16

NAME = "longform"
TITLE = "A long recording across the pool"
#: The recording's length, in seconds: full and quick runs.
FULL_SECONDS, QUICK_SECONDS = 300.0, 45.0
#: The recording's parts, pauses and reference text.
RECORDING = "longform-en.json"
#: In a folder without :data:`RECORDING` (the test speech of tests/data/speech): these
#: clips in turn and the pauses between them (s).
PARTS = ("en-long.wav", "jfk.wav", "en-fox.wav", "en-hello.wav", "country-norway.wav")
PAUSES = (0.6, 1.5, 3.0, 0.8, 2.2)
#: Sites' 1 s clips timed on the idle engine, and at most this many during the long job.
SITE_CALLS = 5


def build_recording(seconds: float, folder: Path | None = None) -> tuple[np.ndarray, str]:
    """``(int16 samples, the text said)``: the parts of :data:`RECORDING` in order, each
    followed by its pause of silence, as many as make at least ``seconds`` (all of them: five
    minutes of real speech). From a ``folder`` without that file, :data:`PARTS` in turn with
    :data:`PAUSES` between them until the recording is at least ``seconds`` long."""
    import soundfile

    folder = folder or REAL_DIR
    if not (folder / RECORDING).is_file():
        return _cycled(seconds, folder)
    plan = json.loads((folder / RECORDING).read_text(encoding="utf-8"))
    audio: dict[str, np.ndarray] = {}
    parts: list[np.ndarray] = []
    texts: list[str] = []
    total = 0
    for part in plan["parts"]:
        if total >= seconds * SAMPLE_RATE:
            break
        if part["file"] not in audio:
            samples, _ = soundfile.read(folder / part["file"], dtype="int16")
            audio[part["file"]] = np.ascontiguousarray(samples)
        clip = audio[part["file"]]
        pause = np.zeros(int(part["pause_after_s"] * SAMPLE_RATE), dtype="<i2")
        parts += [clip, pause]
        texts.append(part["text"])
        total += len(clip) + len(pause)
    return np.concatenate(parts), " ".join(texts)


def _cycled(seconds: float, folder: Path) -> tuple[np.ndarray, str]:
    said = {c["file"]: c["text"] for c in json.loads((folder / "clips.json").read_text())}
    clips = [parse_wav((folder / name).read_bytes()).samples for name in PARTS]
    parts: list[np.ndarray] = []
    texts: list[str] = []
    total, turn = 0, 0
    while total < seconds * SAMPLE_RATE:
        clip = clips[turn % len(clips)]
        pause = np.zeros(int(PAUSES[turn % len(PAUSES)] * SAMPLE_RATE), dtype="<i2")
        parts += [clip, pause]
        texts.append(said[PARTS[turn % len(PARTS)]])
        total += len(clip) + len(pause)
        turn += 1
    return np.concatenate(parts), " ".join(texts)


def words(text: str) -> list[str]:
    """Lower-case words, punctuation dropped."""
    return re.findall(r"\w+", text.lower())


def word_errors(reference: str, heard: str) -> tuple[int, int]:
    """``(word-level edit distance from reference to heard, the reference's words)``."""
    ref, hyp = words(reference), words(heard)
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, start=1):
        previous, row[0] = row[0], i
        for j, other in enumerate(hyp, start=1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (word != other))
    return row[-1], len(ref)


def word_error_rate(reference: str, heard: str) -> float:
    """Word-level edit distance from ``reference`` to ``heard``, over the reference's words."""
    errors, total = word_errors(reference, heard)
    return errors / max(1, total)


def run(ctx: Context) -> dict[str, Any]:
    """The wall times, the ratio to the faster direct way, the word error rates and the
    sites' latency."""
    if ctx.settings.device == "cuda":
        raise Skip("longform measures the CPU; run it without --device cuda")
    seconds = QUICK_SECONDS if ctx.settings.quick else FULL_SECONDS
    samples, said = build_recording(seconds)
    audio = samples.astype(np.float32) / 32768
    ctx.reporter.start(NAME, 3)
    ctx.reporter.step("faster-whisper transcribe")
    direct_s, direct_text = _direct(ctx, audio, batched=False)
    ctx.reporter.advance()
    ctx.reporter.step("faster-whisper BatchedInferencePipeline")
    batched_s, batched_text = _direct(ctx, audio, batched=True)
    ctx.reporter.advance()
    ctx.reporter.step("the engine's /v1/audio/transcriptions")
    engine = start_engine(
        ctx.home, ctx.settings.model, workers=ctx.workers, log_name="longform.log"
    )
    ctx.cleanups.append(engine.stop)
    try:
        engine.wait_ready()
        figures = asyncio.run(_through_engine(engine, ctx.settings.model, samples))
    finally:
        engine.stop()
    ctx.reporter.advance()
    faster = min(direct_s, batched_s)
    return {
        "source": f"tests/data/realspeech/{RECORDING}",
        "recording_s": round(len(samples) / SAMPLE_RATE, 1),
        "workers": ctx.workers,
        "engine_s": figures["engine_s"],
        "transcribe_s": direct_s,
        "batched_s": batched_s,
        "speedup_vs_faster": faster / figures["engine_s"],
        "wer": {
            "engine": word_error_rate(said, figures["text"]),
            "transcribe": word_error_rate(said, direct_text),
            "batched": word_error_rate(said, batched_text),
            "engine_vs_transcribe": word_error_rate(direct_text, figures["text"]),
        },
        "site_idle_s": figures["site_idle_s"],
        "site_during_s": figures["site_during_s"],
        "site_calls_during": figures["site_calls_during"],
    }


def _direct(ctx: Context, audio: np.ndarray, batched: bool) -> tuple[float, str]:
    """faster-whisper on the whole recording in this process, with every core: the seconds
    and the text (language given, beam 5; otherwise each way's own defaults)."""
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    from byoa_skills.runtimes.speech import DecodeOptions

    options = DecodeOptions()
    model = WhisperModel(str(ctx.model_dir), compute_type="int8", cpu_threads=ctx.cores)
    model.transcribe(audio[: SAMPLE_RATE * 2], language="en")  # warm, as the workers are
    common = {
        "language": "en",
        "beam_size": options.beam_size,
        "without_timestamps": True,
        "max_new_tokens": options.max_new_tokens,
    }
    began = time.perf_counter()
    if batched:
        pipeline = BatchedInferencePipeline(model)
        segments, _ = pipeline.transcribe(audio, batch_size=8, **common)
    else:
        # its own long-form decoding: timestamps, the previous text as a prompt
        segments, _ = model.transcribe(audio, language="en", beam_size=options.beam_size)
    text = " ".join(segment.text.strip() for segment in segments)
    return time.perf_counter() - began, text


async def _through_engine(engine: EngineProcess, model: str, samples: np.ndarray) -> dict[str, Any]:
    hello = parse_wav((speech_dir() / "en-hello.wav").read_bytes()).samples
    site = json_body(skill_body(hello))
    async with aiohttp.ClientSession() as session:
        await engine.call(session, site)  # a first call on a fresh engine is not counted
        idle = [(await engine.call(session, site)).waited for _ in range(SITE_CALLS)]
        wav = wav_from_int16(samples)
        began = time.perf_counter()
        text = await _transcribe(session, engine, model, wav)
        engine_s = time.perf_counter() - began
        # again, with a site's clip sent every half second while it runs
        job = asyncio.create_task(_transcribe(session, engine, model, wav))
        during: list[float] = []
        await asyncio.sleep(0.2)  # the pieces are on the workers
        while True:  # at least one, however soon the job ends
            during.append((await engine.call(session, site)).waited)
            if job.done():
                break
            await asyncio.sleep(0.2)
        await job
    return {
        "engine_s": engine_s,
        "text": text,
        "site_idle_s": statistics.median(idle),
        "site_during_s": statistics.median(during) if during else None,
        "site_calls_during": len(during),
    }


async def _transcribe(
    session: aiohttp.ClientSession, engine: EngineProcess, model: str, wav: bytes
) -> str:
    status, body = await post_transcription(session, engine, wav, "long.wav", "audio/wav", model)
    if status != 200:
        raise RuntimeError(f"the long recording was refused: {status} {body}")
    return str(body["text"])
