"""Long recordings within bounds: decoded and cut a few windows at a time, a few recordings
at once, bodies bounded however they are sent, limits checked at start, pieces stopped when
the client leaves, and sites' clips answered however many recordings wait."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import subprocess
import sys
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import numpy as np
import pytest
from engine import TOKEN, Engine
from speech import SPEECH, skill_input

from byoa_skills.bench.scenarios.longmemory import speech_flac
from byoa_skills.models import model_path
from byoa_skills.pool import PoolConfig, QueueFull, WorkerPool
from byoa_skills.pool.pool import Priority
from byoa_skills.recordings import (
    BLOCK_FRAMES,
    VAD_SPAN_SECONDS,
    BlockCutter,
    cut,
    decode_audio,
    open_audio,
)
from byoa_skills.serve.openai_api import UploadLimits
from byoa_skills.wav import SAMPLE_RATE, parse_wav, wav_from_int16

WINDOW = 15.0
MIB = 2**20
#: The most samples a cutter may hold: its VAD span, the pieces it may still change, a block.
MOST_HELD = int(max(VAD_SPAN_SECONDS, 3 * WINDOW) * SAMPLE_RATE) + 3 * int(WINDOW * SAMPLE_RATE)
MOST_HELD += BLOCK_FRAMES


def silent_hour(folder: Path) -> Path:
    """59 minutes of silence as FLAC, 173 kB (made by sox, as a visitor would)."""
    path = folder / "silent.flac"
    if not path.exists():
        subprocess.run(
            [
                "sox",
                "-D",
                "-n",
                "-r",
                "16000",
                "-c",
                "1",
                "-b",
                "16",
                str(path),
                "trim",
                "0",
                "3540",
            ],
            check=True,
        )
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for the generated recordings, shared by the tests of this module."""
    return tmp_path_factory.mktemp("recordings")


def measured_blocks(blocks: Iterator[np.ndarray], sizes: list[int]) -> Iterator[np.ndarray]:
    for block in blocks:
        sizes.append(len(block))
        yield block


# -- decoding and cutting in bounded pieces -----------------------------------------------


def test_a_silent_hour_is_decoded_and_cut_a_few_windows_at_a_time(files: Path) -> None:
    data = silent_hour(files).read_bytes()
    sizes: list[int] = []
    tracemalloc.start()
    try:
        audio = open_audio(data)
        cutter = BlockCutter(audio.frames, WINDOW)
        pieces = list(cutter.pieces(measured_blocks(audio.blocks(), sizes)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (audio.decoder, audio.seconds, pieces) == ("pyav", 3540.0, [])
    assert sum(sizes) == audio.frames and max(sizes) <= BLOCK_FRAMES
    assert cutter.most_held <= MOST_HELD < audio.frames / 20
    # the whole recording as int16 and float32 alone would be 340 MB
    assert peak < 64 * MIB, f"{peak / MIB:.0f} MiB allocated at once"


def test_an_hour_of_speech_is_cut_into_its_pieces_a_few_windows_at_a_time(files: Path) -> None:
    path = speech_flac(files / "speech-hour.flac", 3600.0)
    sizes: list[int] = []
    tracemalloc.start()
    try:
        audio = open_audio(path.read_bytes())
        cutter = BlockCutter(audio.frames, WINDOW)
        spans, covered = [], 0
        for piece, samples in cutter.pieces(measured_blocks(audio.blocks(), sizes)):
            assert len(samples) == piece.frames <= WINDOW * SAMPLE_RATE
            spans.append((piece.start, piece.end))
            covered += piece.frames
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert audio.seconds == 3600.0 and max(sizes) <= BLOCK_FRAMES
    assert cutter.most_held <= MOST_HELD
    assert peak < 96 * MIB, f"{peak / MIB:.0f} MiB allocated at once"
    assert spans == sorted(spans) and all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert len(spans) > 200 and covered > 0.7 * audio.frames  # speech, with short pauses


def test_pieces_cut_block_by_block_are_the_recordings_own(files: Path) -> None:
    path = speech_flac(files / "speech-6min.flac", 360.0)
    audio = open_audio(path.read_bytes())
    whole = decode_audio(path.read_bytes()).samples
    streamed = list(BlockCutter(audio.frames, WINDOW).pieces(audio.blocks()))
    at_once = cut(whole.astype(np.float32) / 32768, WINDOW)
    for piece, samples in streamed:
        assert np.array_equal(samples, whole[piece.start : piece.end])
    covered = sum(p.frames for p, _ in streamed)
    assert abs(covered - sum(p.frames for p in at_once)) < 0.03 * covered
    assert abs(len(streamed) - len(at_once)) <= max(2, len(at_once) // 10)
    short = decode_audio((SPEECH / "jfk.wav").read_bytes())
    one = list(BlockCutter(short.frames, WINDOW).pieces(iter([short.samples])))
    assert [(p.start, p.end) for p, _ in one] == [(0, short.frames)]


# -- the limits, checked at start ----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("BYOA_SKILLS_MAX_RECORDING_MINUTES", "inf"),
        ("BYOA_SKILLS_MAX_RECORDING_MINUTES", "1e400"),
        ("BYOA_SKILLS_MAX_RECORDING_MINUTES", "nan"),
        ("BYOA_SKILLS_MAX_UPLOAD_MB", "inf"),
        ("BYOA_SKILLS_MAX_UPLOAD_MB", "abc"),
        ("BYOA_SKILLS_MAX_UPLOAD_MB", "1e-9"),
        ("BYOA_SKILLS_RECORDINGS_AT_ONCE", "0"),
        ("BYOA_SKILLS_RECORDINGS_AT_ONCE", "1.5"),
        ("BYOA_SKILLS_UPLOADS_WAITING", "0"),
        ("BYOA_SKILLS_UPLOADS_WAITING", "many"),
        ("BYOA_SKILLS_UPLOADS_WAITING_MB", "inf"),
        ("BYOA_SKILLS_UPLOADS_WAITING_MB", "-5"),
    ],
)
def test_serve_refuses_a_limit_that_is_not_a_finite_positive_number(
    tmp_path: Path, name: str, value: str
) -> None:
    env = {**os.environ, "BYOA_SKILLS_HOME": str(tmp_path), name: value}
    done = subprocess.run(
        [sys.executable, "-m", "byoa_skills", "serve", "--model", "tiny.en"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and name in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_limits_are_finite_and_positive() -> None:
    limits = UploadLimits.from_env(
        {
            "BYOA_SKILLS_MAX_RECORDING_MINUTES": "90",
            "BYOA_SKILLS_MAX_UPLOAD_MB": "0.5",
            "BYOA_SKILLS_RECORDINGS_AT_ONCE": "3",
            "BYOA_SKILLS_UPLOADS_WAITING": "4",
            "BYOA_SKILLS_UPLOADS_WAITING_MB": "48",
        }
    )
    assert (limits.max_seconds, limits.max_bytes, limits.at_once) == (5400.0, 512 * 1024, 3)
    assert (limits.waiting, limits.waiting_bytes) == (4, 48 * MIB)
    assert (UploadLimits().waiting, UploadLimits().waiting_bytes) == (8, 100 * MIB)
    for wrong in (
        {"max_seconds": float("inf")},
        {"max_bytes": 0},
        {"at_once": 0},
        {"waiting": 0},
        {"waiting_bytes": 0},
    ):
        with pytest.raises(ValueError):
            UploadLimits(**wrong)  # type: ignore[arg-type]


# -- the pool keeps places for sites' clips ------------------------------------------------


@pytest.mark.slow
def test_pieces_waiting_never_take_a_sites_place_in_the_queue(engine_home: Path) -> None:
    folder = model_path("tiny.en", cache_dir=engine_home / "cache" / "models")
    config = PoolConfig(model_dir=folder, model_name="tiny.en", workers=1, max_queue=2)
    clip = parse_wav((SPEECH / "jfk.wav").read_bytes())
    hello = parse_wav((SPEECH / "en-hello.wav").read_bytes())

    async def main() -> tuple[list[str], list[str]]:
        pool = WorkerPool(config)
        await pool.start()
        try:
            pieces = [
                asyncio.create_task(pool.transcribe(clip, "en", priority=Priority.BULK))
                for _ in range(8)
            ]
            for _ in range(3000):  # a piece runs, the others wait (within 30 s)
                if pool.busy_workers:
                    break
                await asyncio.sleep(0.01)
            sites = [asyncio.create_task(pool.transcribe(hello, "en")) for _ in range(2)]
            site_answers = await asyncio.gather(*sites, return_exceptions=True)
            piece_answers = await asyncio.gather(*pieces, return_exceptions=True)
            with pytest.raises(QueueFull):  # the sites' own places are bounded as before
                await asyncio.gather(*(pool.transcribe(hello, "en") for _ in range(4)))
        finally:
            await pool.close()
        return [_outcome(a) for a in site_answers], [_outcome(a) for a in piece_answers]

    sites, pieces = asyncio.run(main())
    assert sites == ["ok", "ok"], sites
    assert pieces == ["ok"] * 8, pieces  # they waited for a place, none was refused


def _outcome(answer: object) -> str:
    return getattr(answer, "code", "ok") if isinstance(answer, BaseException) else "ok"


# -- through serve ---------------------------------------------------------------------------

UPLOAD_MB = 12


@pytest.fixture(scope="module")
def small_engine(engine_home: Path) -> Iterator[Engine]:
    """``serve`` on ``tiny.en``: one worker, a queue of 1, a 12 MB upload limit, two
    recordings decoded at once (the default)."""
    args = ("--model", "tiny.en", "--workers", "1", "--queue", "1", "--idle-release", "0")
    env = {"BYOA_SKILLS_MAX_UPLOAD_MB": str(UPLOAD_MB)}
    running = Engine.start(engine_home, args, token=TOKEN, log_name="limits.log", env=env)
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


async def post_file(
    session: aiohttp.ClientSession, engine: Engine, data: bytes, name: str, **fields: str
) -> tuple[int, dict[str, object]]:
    form = aiohttp.FormData()
    form.add_field("file", data, filename=name)
    form.add_field("model", "whisper-1")
    for key, value in fields.items():
        form.add_field(key, value)
    async with session.post(
        f"{engine.url}/v1/audio/transcriptions",
        data=form,
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as response:
        return response.status, await response.json(content_type=None)


def status_mib(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {key} for {pid}")


@pytest.mark.slow
def test_three_silent_hours_at_once_take_turns_and_little_memory(
    small_engine: Engine, files: Path
) -> None:
    data = silent_hour(files).read_bytes()
    pid = small_engine.process.pid
    logged = len(small_engine.log.read_text())
    before = status_mib(pid, "VmRSS")
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak from now on
    except OSError:
        before = status_mib(pid, "VmHWM")

    async def main() -> list[tuple[int, dict[str, object]]]:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
            return list(
                await asyncio.gather(
                    *(post_file(session, small_engine, data, "s.flac") for _ in range(3))
                )
            )

    answers = asyncio.run(main())
    grown = status_mib(pid, "VmHWM") - before
    assert [status for status, _ in answers] == [200, 200, 200], answers
    assert all(body["text"] == "" and body["usage"]["seconds"] == 3540.0 for _, body in answers)  # type: ignore[index]
    log = small_engine.log.read_text()[logged:]
    decoding = [int(n) for n in re.findall(r"event=recording-starts decoding=(\d+)", log)]
    assert len(decoding) == 3 and max(decoding) == 2, log
    assert "event=recording-waits" in log  # the third waited, holding only its bytes
    # generous: the whole recording decoded at once took about 1 GB, three of them 3 GB
    assert grown < 400, f"serve's peak grew {grown:.0f} MiB"


@pytest.mark.slow
def test_sites_clips_are_answered_while_recordings_fill_the_pool(
    small_engine: Engine, files: Path
) -> None:
    data = speech_flac(files / "speech-90s.flac", 90.0).read_bytes()
    site = json.dumps({"input": skill_input("en-hello.wav")}).encode()
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

    async def main() -> tuple[list[int], list[tuple[int, str]]]:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
            jobs = [
                asyncio.create_task(post_file(session, small_engine, data, "a.flac", language="en"))
                for _ in range(2)
            ]
            await asyncio.sleep(1.0)  # their pieces run and wait in the pool
            sites = []
            while not all(job.done() for job in jobs) or not sites:
                async with session.post(
                    f"{small_engine.url}/v1/skills/audio.transcribe", data=site, headers=headers
                ) as response:
                    body = await response.json(content_type=None)
                    sites.append((response.status, str(body.get("code", "ok"))))
                await asyncio.sleep(0.2)
            done = await asyncio.gather(*jobs)
        return [status for status, _ in done], sites

    recordings, sites = asyncio.run(main())
    assert recordings == [200, 200]
    assert len(sites) >= 3 and set(sites) == {(200, "ok")}, sites


def chunked_form(boundary: str, parts: list[tuple[str, bytes]]) -> Iterator[bytes]:
    for name, value in parts:
        filename = '; filename="a.wav"' if name == "file" else ""
        yield (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"{filename}\r\n\r\n'
        ).encode()
        for start in range(0, len(value), 256 * 1024):
            yield value[start : start + 256 * 1024]
        yield b"\r\n"
    yield f"--{boundary}--\r\n".encode()


async def post_chunked(engine: Engine, parts: list[tuple[str, bytes]]) -> tuple[int, str]:
    boundary = "limits-test-boundary"

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunked_form(boundary, parts):
            yield chunk

    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": f"multipart/form-data; boundary={boundary}",
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{engine.url}/v1/audio/transcriptions", data=body(), headers=headers
        ) as response,
    ):
        assert "Content-Length" not in response.request_info.headers
        answer = await response.json(content_type=None)
        return response.status, answer["error"]["code"] if "error" in answer else "ok"


def test_a_chunked_form_counts_against_the_upload_limit(small_engine: Engine) -> None:
    jfk = (SPEECH / "jfk.wav").read_bytes()
    fields = [(f"note{i}", b"x" * 60_000) for i in range(20)]  # each within a field's limit
    near_limit = wav_from_int16(np.zeros((UPLOAD_MB * MIB - 100) // 2, dtype="<i2"))
    over = asyncio.run(
        post_chunked(small_engine, [("model", b"whisper-1"), *fields, ("file", near_limit)])
    )
    assert over == (413, "file-too-large")
    many = [(f"n{i}", b"1") for i in range(40)]
    too_many = asyncio.run(
        post_chunked(small_engine, [("model", b"whisper-1"), *many, ("file", jfk)])
    )
    assert too_many == (400, "bad-request")
    fine = asyncio.run(post_chunked(small_engine, [("model", b"whisper-1"), ("file", jfk)]))
    assert fine == (200, "ok")


@pytest.mark.slow
def test_a_recording_whose_client_left_is_stopped(small_engine: Engine, files: Path) -> None:
    path = speech_flac(files / "speech-10min.flac", 600.0)
    audio = open_audio(path.read_bytes())
    total = sum(1 for _ in BlockCutter(audio.frames, WINDOW).pieces(audio.blocks()))
    before = len(small_engine.activity())
    logged = small_engine.log.read_text().count("event=recording-starts")

    async def leave_early() -> None:
        async with aiohttp.ClientSession() as session:
            job = asyncio.create_task(
                post_file(session, small_engine, path.read_bytes(), "a.flac", language="en")
            )
            for _ in range(600):  # its turn came (within 30 s)
                if small_engine.log.read_text().count("event=recording-starts") > logged:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(2.0)  # a few pieces are answered
            assert not job.done(), f"answered before its client left: {job.result()}"
            job.cancel()  # the connection is closed
            with pytest.raises(asyncio.CancelledError):
                await job

    asyncio.run(leave_early())

    def entry(rows: list[str]) -> list[dict[str, object]]:
        return [e for e in map(json.loads, rows[before:]) if e.get("kind") == "local"]

    local = entry(small_engine.activity_once(lambda rows: bool(entry(rows)), seconds=60))
    assert local and local[-1]["outcome"] == "client-gone", local
    assert 0 <= int(local[-1]["pieces"]) < total / 2, (local[-1], total)  # type: ignore[call-overload]
    assert "event=recording-client-gone" in small_engine.log.read_text()
