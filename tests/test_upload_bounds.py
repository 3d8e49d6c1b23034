"""Uploads on the OpenAI door cost nothing once dropped, and the uploads held are bounded:
against a real ``serve``, long Opus uploads whose clients leave stop decoding at once (the
engine's own gauge and its CPU time say so) while the store's routes answer, and uploads
beyond the line's count or bytes are refused ``uploads-full``."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
from engine import TOKEN, Engine
from speech import SPEECH

from byoa_skills.bench.scenarios.longmemory import repeated_recording
from byoa_skills.recordings import AudioFile, RecordingWork, Stop, open_audio

#: The long recording's length: 59 one-minute copies.
MINUTES = 59
#: How long each dropped client stays, and how far apart they arrive (s).
STAYS, APART = 1.5, 0.5
#: Uploads dropped in the first test.
DROPPED = 6


@pytest.fixture(scope="session")
def hour(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """59 minutes of a tone in noise as Ogg Opus (16 kb/s, about 6 MB), made once a session."""
    path = tmp_path_factory.mktemp("uploads") / "hour.opus"
    return repeated_recording(path, MINUTES, "libopus", "ogg", 16000, 48000).read_bytes()


def test_a_measure_cancelled_returns_once_its_decode_has_stopped(hour: bytes) -> None:
    work = RecordingWork(1)
    threads: list[str] = []

    def measure(stop: Stop) -> AudioFile:
        threads.append(threading.current_thread().name)
        return open_audio(hour, stop=stop)

    async def main() -> tuple[int, int]:
        job = asyncio.create_task(work.run(measure))
        while not work.running:
            await asyncio.sleep(0.01)
        queued = asyncio.create_task(work.run(measure))  # behind it: the one thread is busy
        await asyncio.sleep(0.5)  # well inside the hour's decode
        queued.cancel()  # cancelled before it ran: it never runs
        with pytest.raises(asyncio.CancelledError):
            await queued
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job
        return work.running, len(threads)  # the cancellation came once the job had ended

    try:
        assert asyncio.run(main()) == (0, 1)
    finally:
        work.close()
    assert threads[0].startswith("recording")  # its own thread, not the default executor's


def start(home: Path, name: str, **env: str) -> Engine:
    args = ("--model", "tiny.en", "--workers", "1", "--queue", "4", "--idle-release", "0")
    return Engine.start(home, args, token=TOKEN, log_name=name, env=env)


@pytest.fixture
def engine(engine_home: Path) -> Iterator[Engine]:
    """``serve`` on ``tiny.en``: one worker, two recordings decoded at once (the default)."""
    running = start(engine_home, "dropped.log")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


async def post(
    session: aiohttp.ClientSession, engine: Engine, data: bytes, name: str = "a.opus"
) -> tuple[int, str]:
    """One transcription; ``(status, code)``, code ``ok`` for an answer."""
    form = aiohttp.FormData()
    form.add_field("file", data, filename=name)
    form.add_field("model", "whisper-1")
    form.add_field("language", "en")
    async with session.post(
        f"{engine.url}/v1/audio/transcriptions",
        data=form,
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as response:
        body = await response.json(content_type=None)
        return response.status, body["error"]["code"] if "error" in body else "ok"


def cpu_seconds(pid: int) -> float:
    """The CPU time ``pid`` has used so far, its threads together (its children apart)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def stays_then_leaves(engine: Engine, data: bytes, after: float) -> None:
    """Send ``data``, then close the connection ``after`` seconds later (no answer yet)."""
    async with aiohttp.ClientSession() as session:
        job = asyncio.create_task(post(session, engine, data))
        await asyncio.sleep(after)
        assert not job.done(), f"answered before its client left: {job.result()}"
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job


async def health(session: aiohttp.ClientSession, engine: Engine) -> int:
    """``GET /health``: it reads the wallet's store, on the event loop's default executor."""
    async with session.get(f"{engine.url}/health") as response:
        await response.read()
        return response.status


def test_dropped_uploads_stop_decoding_and_the_store_answers(engine: Engine, hour: bytes) -> None:
    pid = engine.process.pid
    working: list[float] = []

    async def main() -> tuple[list[int], bool]:
        timeout = aiohttp.ClientTimeout(total=120)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            clients = []
            for _ in range(DROPPED):  # each arrives, gets its turn, and leaves 1.5 s later
                clients.append(asyncio.create_task(stays_then_leaves(engine, hour, STAYS)))
                await asyncio.sleep(APART)
            answered = []
            while not all(client.done() for client in clients):
                working.append(engine.metric("byoa_recordings_working"))
                answered.append(await health(session, engine))
                await asyncio.sleep(0.2)
            await asyncio.gather(*clients)
            # within 30 s of the last client leaving: no recording works, and serve is idle
            limit, idle = time.monotonic() + 30, False
            while not idle and time.monotonic() < limit:
                used = cpu_seconds(pid)
                answered.append(await health(session, engine))
                await asyncio.sleep(1.0)
                stopped = engine.metric("byoa_recordings_working") == 0
                idle = stopped and cpu_seconds(pid) - used < 0.3
        return answered, idle

    answered, idle = asyncio.run(main())
    assert idle, "serve still works for clients that left"
    assert answered and set(answered) == {200}, answered
    assert max(working) <= 2, working  # never more than the recordings decoded at once
    assert engine.metric("byoa_recordings_in_turn") == 0
    assert engine.metric("byoa_uploads_waiting") == 0
    log = engine.log.read_text()
    assert log.count("event=recording-client-gone") == DROPPED, log[-3000:]


# -- the line of uploads ---------------------------------------------------------------------


@pytest.fixture
def narrow(engine_home: Path) -> Iterator[Engine]:
    """``serve`` decoding one recording at a time, holding at most two uploads of 10 MB in
    all before their turn."""
    env = {
        "BYOA_SKILLS_RECORDINGS_AT_ONCE": "1",
        "BYOA_SKILLS_UPLOADS_WAITING": "2",
        "BYOA_SKILLS_UPLOADS_WAITING_MB": "10",
    }
    running = start(engine_home, "narrow.log", **env)
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


async def post_chunked(engine: Engine, data: bytes) -> tuple[int, str]:
    """The form sent chunked (no ``Content-Length``): its bytes are known only as they come."""
    boundary = "bounds-test-boundary"

    async def body() -> AsyncIterator[bytes]:
        yield (
            f'--{boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\n'
            f"whisper-1\r\n--{boundary}\r\nContent-Disposition: form-data; "
            f'name="file"; filename="a.opus"\r\n\r\n'
        ).encode()
        for start in range(0, len(data), 256 * 1024):
            yield data[start : start + 256 * 1024]
        yield f"\r\n--{boundary}--\r\n".encode()

    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Content-Type": f"multipart/form-data; boundary={boundary}",
    }
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session,
        session.post(
            f"{engine.url}/v1/audio/transcriptions", data=body(), headers=headers
        ) as response,
    ):
        answer = await response.json(content_type=None)
        return response.status, answer["error"]["code"] if "error" in answer else "ok"


def logged(engine: Engine, event: str, times: int, seconds: float = 60) -> None:
    """Wait until ``event`` is in the engine's log ``times`` times."""
    limit = time.monotonic() + seconds
    while engine.log.read_text().count(event) < times:
        assert time.monotonic() < limit, f"{event} not logged {times} times"
        time.sleep(0.05)


def test_the_uploads_held_are_bounded_by_count_and_bytes(narrow: Engine, hour: bytes) -> None:
    clip = (SPEECH / "jfk.wav").read_bytes()
    assert len(hour) > 5 * 2**20 and 2 * len(hour) > 10 * 2**20 > len(hour) + len(clip)

    async def main() -> dict[str, tuple[int, str]]:
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            held = [asyncio.create_task(post(session, narrow, hour))]  # in its turn, measured
            await asyncio.to_thread(logged, narrow, "event=recording-starts", 1)
            held.append(asyncio.create_task(post(session, narrow, hour)))  # waits, 6 MB
            await asyncio.to_thread(logged, narrow, "event=recording-waits", 1)
            seen = {
                "bytes": await post(session, narrow, hour),  # 12 MB would wait
                "chunked": await post_chunked(narrow, hour),
            }
            held.append(asyncio.create_task(post(session, narrow, clip, "jfk.wav")))  # fits
            await asyncio.to_thread(logged, narrow, "event=recording-waits", 2)
            seen["count"] = await post(session, narrow, clip, "jfk.wav")  # a third waiting
            waiting = narrow.metric("byoa_uploads_waiting")
            for job in held:  # their clients leave
                job.cancel()
            await asyncio.gather(*held, return_exceptions=True)
        limit = time.monotonic() + 30
        while narrow.metric("byoa_recordings_in_turn") and time.monotonic() < limit:
            await asyncio.sleep(0.1)
        seen["waiting"] = (int(waiting), "")
        return seen

    seen = asyncio.run(main())
    assert seen["bytes"] == (503, "uploads-full"), seen
    assert seen["chunked"] == (503, "uploads-full"), seen
    assert seen["count"] == (503, "uploads-full"), seen
    assert seen["waiting"] == (2, ""), seen
    assert narrow.metric("byoa_uploads_waiting_bytes") == 0
    assert narrow.metric("byoa_recordings_working") == 0
