"""Idle costs little: after the idle time the workers are let go and the front process stays;
a call, a grant or a warm-up starts them again, and no call is lost while they come and go."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest
from engine import TOKEN, start_engine
from grants import GEO_MANIFEST, grant
from poolkit import run_with_pool
from speech import skill_input

from byoa_skills.models import model_path
from byoa_skills.pool import PoolConfig, WorkerPool
from byoa_skills.wav import parse_wav

SPEECH = Path(__file__).parent / "data" / "speech"


@pytest.fixture(scope="module")
def idle_pool(engine_home: Path) -> PoolConfig:
    """Two tiny.en workers let go after half a second without a call."""
    folder = model_path("tiny.en", cache_dir=engine_home / "cache" / "models")
    return PoolConfig(model_dir=folder, model_name="tiny.en", workers=2, idle_release=0.5)


async def until(condition: Callable[[], bool], seconds: float = 120) -> None:
    """Wait for ``condition`` (a readiness wait, not a measurement)."""
    limit = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < limit, "the pool never got there"
        await asyncio.sleep(0.05)


JFK = parse_wav((SPEECH / "jfk.wav").read_bytes())


def test_idle_workers_are_let_go_and_the_next_call_starts_them(idle_pool: PoolConfig) -> None:
    async def body(pool: WorkerPool) -> tuple[list[int], int, bool, str, int]:
        first = pool.worker_pids()
        await until(lambda: pool.released)
        await until(lambda: not pool.worker_pids())  # every worker has ended
        gone = pool.warm_workers
        ready = pool.ready  # calls are still taken while the workers are away
        answer = await pool.transcribe(JFK, "en")
        await until(lambda: pool.warm_workers == 2)
        assert not set(first) & set(pool.worker_pids())  # new processes
        return first, gone, ready, answer.text.lower(), pool.warm_workers

    first, gone, ready, text, warm = run_with_pool(idle_pool, body)
    assert len(first) == 2 and gone == 0 and ready
    assert "country" in text and warm == 2


def test_no_call_is_lost_while_the_workers_are_let_go_and_come_back(
    idle_pool: PoolConfig,
) -> None:
    config = replace(idle_pool, idle_release=0.0)  # let go by hand, at the worst moments

    async def body(pool: WorkerPool) -> list[str]:
        texts: list[str] = []
        for _ in range(3):
            releasing = asyncio.create_task(pool.release())
            await asyncio.sleep(0)  # the workers are being stopped as the calls come
            calls = [asyncio.create_task(pool.transcribe(JFK, "en")) for _ in range(4)]
            await releasing
            texts += [answer.text.lower() for answer in await asyncio.gather(*calls)]
        return texts

    texts = run_with_pool(config, body)
    assert len(texts) == 12 and all("country" in text for text in texts)


def test_warm_up_returns_once_every_worker_is_warm(idle_pool: PoolConfig) -> None:
    config = replace(idle_pool, idle_release=0.0)

    async def body(pool: WorkerPool) -> tuple[int, int, bool]:
        await pool.release()
        await until(lambda: not pool.worker_pids())
        before = pool.warm_workers
        await pool.warm_up()
        return before, pool.warm_workers, pool.released

    assert run_with_pool(config, body) == (0, 2, False)


def test_a_grant_is_answered_once_the_workers_are_warm_again(engine_home: Path) -> None:
    engine = start_engine(
        engine_home,
        "--model",
        "tiny.en",
        "--workers",
        "1",
        "--idle-release",
        "1",
        log_name="idle.log",
    )
    try:
        engine.wait_ready()

        async def run() -> tuple[int, int, int, int]:
            limit = time.monotonic() + 120
            while engine.warm() != 0:  # let go after a second without a call
                assert time.monotonic() < limit
                await asyncio.sleep(0.1)
            headers = {"Authorization": f"Bearer {TOKEN}"}
            body = {"origin": "https://geo.example.org", "manifest": GEO_MANIFEST, "grant": grant()}
            async with aiohttp.ClientSession(headers=headers) as session:
                async with session.post(f"{engine.url}/v1/grants", json=body) as answer:
                    status, granted = answer.status, await answer.json()
                warm_at_answer = engine.warm()
                call = {
                    "grantId": granted["grantId"],
                    "input": skill_input("jfk.wav"),
                    "params": {"language": "en"},
                }
                url = f"{engine.url}/v1/skills/audio.transcribe"
                async with session.post(url, json=call) as answered:
                    call_status = answered.status
            return status, warm_at_answer, call_status, len(engine.workers())

        status, warm_at_answer, call_status, workers = asyncio.run(run())
        assert (status, warm_at_answer, call_status, workers) == (200, 1, 200, 1)
    finally:
        engine.stop()
