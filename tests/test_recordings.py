"""Any audio file to 16 kHz mono, cut into pieces of at most one window, stitched back; and
the pool taking sites' clips before a long recording's pieces."""

from __future__ import annotations

import asyncio
import io
import itertools
import subprocess
from pathlib import Path

import numpy as np
import pytest

from byoa_skills.models import model_path
from byoa_skills.pool import PoolConfig, WorkerPool
from byoa_skills.pool.pool import Priority
from byoa_skills.recordings import (
    Piece,
    RecordingError,
    cut,
    decode_audio,
    join_chunks,
    join_text,
    srt,
    stitch,
    vtt,
)
from byoa_skills.runtimes.speech import Segment, Transcript, Word
from byoa_skills.wav import parse_wav

SPEECH = Path(__file__).parent / "data" / "speech"
JFK = SPEECH / "jfk.wav"


def sox(source: Path, target: Path, *effects: str) -> bytes:
    subprocess.run(["sox", str(source), *effects, str(target)], check=True)
    return target.read_bytes()


def pyav_encoded(samples: np.ndarray, codec: str, container: str) -> bytes:
    """``samples`` (int16, 16 kHz, mono) encoded by PyAV at 44.1 kHz stereo."""
    import av

    out = io.BytesIO()
    with av.open(out, mode="w", format=container) as file:
        stream = file.add_stream(codec, rate=44100, layout="stereo")
        resampler = av.AudioResampler(format=stream.format.name, layout="stereo", rate=44100)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = 16000
        for converted in [*resampler.resample(frame), *resampler.resample(None)]:
            file.mux(stream.encode(converted))
        file.mux(stream.encode(None))
    return out.getvalue()


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    """The best normalized correlation of two signals within 0.1 s of shift."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    best = 0.0
    for shift in range(0, 1600, 16):
        n = min(len(a), len(b) - shift)
        x, y = a[:n], b[shift : shift + n]
        best = max(best, float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y) + 1e-9)))
    return best


@pytest.mark.parametrize("kind", ["wav-48k-stereo", "flac", "ogg", "mp3"])
def test_every_format_decodes_to_the_same_16k_mono_samples(kind: str, tmp_path: Path) -> None:
    original = parse_wav(JFK.read_bytes()).samples
    if kind == "wav-48k-stereo":
        data = sox(JFK, tmp_path / "a.wav", "-r", "48000", "-c", "2")
    elif kind == "flac":
        data = sox(JFK, tmp_path / "a.flac", "-r", "22050")
    elif kind == "ogg":
        data = sox(JFK, tmp_path / "a.ogg")
    else:
        data = pyav_encoded(original, "libmp3lame", "mp3")
    recording = decode_audio(data)
    assert recording.decoder != "wav"
    assert recording.samples.dtype == np.dtype("<i2")
    assert abs(recording.seconds - 11.0) < 0.1
    assert correlation(original, recording.samples) > 0.9


def test_a_clip_as_sites_send_it_is_taken_as_it_is() -> None:
    recording = decode_audio(JFK.read_bytes())
    assert recording.decoder == "wav" and recording.frames == 11 * 16000


def test_what_no_decoder_reads_and_what_is_too_long_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RecordingError) as refused:
        decode_audio(b"not audio at all " * 100)
    assert refused.value.code == "audio-undecodable"
    with pytest.raises(RecordingError) as refused:
        decode_audio(sox(JFK, tmp_path / "a.flac"), max_seconds=5)
    assert refused.value.code == "audio-too-long"
    assert decode_audio(sox(JFK, tmp_path / "b.flac"), max_seconds=11.5).seconds == 11.0


def test_chunks_are_joined_into_pieces_of_at_most_one_window() -> None:
    window = 30 * 16000
    chunks = [
        (0, 5 * 16000),
        (6 * 16000, 20 * 16000),
        (24 * 16000, 40 * 16000),
        (41 * 16000, 120 * 16000),
    ]
    pieces = join_chunks(chunks, window)
    assert [p.index for p in pieces] == list(range(len(pieces)))
    assert all(0 < p.frames <= window for p in pieces)
    assert all(a.end <= b.start for a, b in itertools.pairwise(pieces))
    assert (pieces[0].start, pieces[0].end) == (0, 20 * 16000)
    covered = sum(p.frames for p in pieces)
    assert covered >= sum(end - start for start, end in chunks)


def test_a_long_recording_is_cut_where_nobody_speaks() -> None:
    from byoa_skills.bench.scenarios.longform import build_recording

    samples, _ = build_recording(100, SPEECH)
    audio = samples.astype(np.float32) / 32768
    pieces = cut(audio)
    assert len(pieces) >= 4
    assert all(p.frames <= 30 * 16000 for p in pieces)
    quiet = np.zeros(3 * 16000, dtype=np.float32)
    assert cut(np.concatenate([quiet] * 12)) == []
    assert cut(audio[: 10 * 16000]) == [Piece(0, 0, 10 * 16000)]


def test_answers_are_stitched_in_order_on_the_recording_timeline() -> None:
    pieces = [Piece(0, 0, 16000 * 20), Piece(1, 16000 * 40, 16000 * 60)]
    word = Word(0.5, 0.9, " hello", 0.9)
    answers = [
        Transcript("Hello.", "en", 0.9, 1.0, (Segment(0.0, 1.0, " Hello.", words=(word,)),)),
        Transcript("World.", "en", 0.9, 1.0, (Segment(2.0, 3.5, " World."),)),
    ]
    heard = stitch(pieces, answers, 61.0)
    assert heard.text == "Hello. World." and heard.language == "en"
    assert [(s.start, s.end) for s in heard.segments] == [(0.0, 1.0), (42.0, 43.5)]
    assert heard.segments[0].words == (word,)
    assert join_text(["  a ", "", "b"]) == "a b"
    assert srt(heard.segments) == (
        "1\n00:00:00,000 --> 00:00:01,000\nHello.\n\n2\n00:00:42,000 --> 00:00:43,500\nWorld.\n"
    )
    assert vtt(heard.segments).startswith("WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nHello.\n")


@pytest.mark.slow
def test_sites_clips_go_before_the_pieces_waiting_in_the_pool(engine_home: Path) -> None:
    folder = model_path("tiny.en", cache_dir=engine_home / "cache" / "models")
    config = PoolConfig(model_dir=folder, model_name="tiny.en", workers=1, max_queue=8)
    clip = parse_wav(JFK.read_bytes())
    order: list[str] = []

    async def call(name: str, priority: Priority) -> None:
        await pool.transcribe(clip, "en", priority=priority)
        order.append(name)

    async def main() -> None:
        nonlocal pool
        pool = WorkerPool(config)
        await pool.start()
        try:
            first = asyncio.create_task(call("bulk-0", Priority.BULK))
            while pool.busy_workers == 0:
                await asyncio.sleep(0.01)
            rest = [asyncio.create_task(call(f"bulk-{i}", Priority.BULK)) for i in (1, 2)]
            await asyncio.sleep(0)
            site = asyncio.create_task(call("site", Priority.SITE))
            await asyncio.gather(first, *rest, site)
        finally:
            await pool.close()

    pool: WorkerPool
    asyncio.run(main())
    assert order == ["bulk-0", "site", "bulk-1", "bulk-2"]
