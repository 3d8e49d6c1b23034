"""The warm pool in this process: bounded queue, recycling, draining, start failures."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from byoa_skills.models import model_path
from byoa_skills.pool import (
    PoolConfig,
    QueueFull,
    ShuttingDown,
    TranscribeFailed,
    WorkerPool,
    WorkerStartFailed,
)
from byoa_skills.wav import parse_wav

SPEECH = Path(__file__).parent / "data" / "speech"


@pytest.fixture(scope="module")
def tiny(engine_home: Path) -> PoolConfig:
    """One single-threaded tiny.en worker with a queue of one."""
    folder = model_path("tiny.en", cache_dir=engine_home / "cache" / "models")
    return PoolConfig(model_dir=folder, model_name="tiny.en", workers=1, max_queue=1)


@pytest.fixture(scope="module")
def jfk() -> object:
    return parse_wav((SPEECH / "jfk.wav").read_bytes())


def run_with_pool(config: PoolConfig, body):  # type: ignore[no-untyped-def]
    async def main():  # type: ignore[no-untyped-def]
        pool = WorkerPool(config)
        await pool.start()
        try:
            return await body(pool)
        finally:
            await pool.close()

    return asyncio.run(main())


async def start_calls(pool: WorkerPool, clip, count: int) -> list[asyncio.Task]:  # type: ignore[no-untyped-def]
    """Start ``count`` calls: the first once taken by the worker, then the others at once."""
    calls = [asyncio.create_task(pool.transcribe(clip, "en"))]
    while pool.busy_workers == 0:
        await asyncio.sleep(0.01)
    calls += [asyncio.create_task(pool.transcribe(clip, "en")) for _ in range(count - 1)]
    await asyncio.sleep(0)
    return calls


def test_a_full_queue_refuses_at_once(tiny: PoolConfig, jfk) -> None:  # type: ignore[no-untyped-def]
    async def body(pool: WorkerPool) -> list[object]:
        calls = await start_calls(pool, jfk, 5)
        return await asyncio.gather(*calls, return_exceptions=True)

    outcomes = run_with_pool(tiny, body)
    texts = [o.text for o in outcomes if not isinstance(o, Exception)]
    refused = [o for o in outcomes if isinstance(o, Exception)]
    # one runs, one waits, the other three are refused without waiting
    assert len(texts) == 2 and texts[0] == texts[1] and "country" in texts[0].lower()
    assert len(refused) == 3 and all(isinstance(o, QueueFull) for o in refused)
    assert {o.code for o in refused} == {"queue-full"}


def test_workers_are_recycled_after_their_calls(tiny: PoolConfig, jfk) -> None:  # type: ignore[no-untyped-def]
    async def body(pool: WorkerPool) -> tuple[list[int], int]:
        pids = [(await pool.transcribe(jfk, "en")).worker_pid for _ in range(3)]
        return pids, pool.restarts

    pids, restarts = run_with_pool(replace(tiny, recycle_after_calls=2), body)
    assert pids[0] == pids[1] != pids[2]
    assert restarts == 1


def test_workers_over_the_memory_ceiling_are_recycled(tiny: PoolConfig, jfk) -> None:  # type: ignore[no-untyped-def]
    async def body(pool: WorkerPool) -> list[int]:
        return [(await pool.transcribe(jfk, "en")).worker_pid for _ in range(2)]

    first, second = run_with_pool(replace(tiny, max_worker_rss_mib=1), body)
    assert first != second


def test_drain_finishes_calls_in_flight_and_refuses_new_ones(tiny: PoolConfig, jfk) -> None:  # type: ignore[no-untyped-def]
    async def body(pool: WorkerPool) -> tuple[list[str], str]:
        running = await start_calls(pool, jfk, 2)
        await pool.drain()
        try:
            await pool.transcribe(jfk, "en")
            late = "answered"
        except ShuttingDown as refusal:
            late = refusal.code
        return [task.result().text for task in running], late

    texts, late = run_with_pool(tiny, body)
    assert len(texts) == 2 and all("country" in text.lower() for text in texts)
    assert late == "shutting-down"


def test_a_refusal_from_the_model_keeps_the_worker(tiny: PoolConfig, jfk) -> None:  # type: ignore[no-untyped-def]
    async def body(pool: WorkerPool) -> tuple[str, int, int]:
        before = pool.worker_pids()
        try:
            await pool.transcribe(jfk, "ru")
            code = "answered"
        except TranscribeFailed as refusal:
            code = refusal.code
        await pool.transcribe(jfk, "en")
        return code, before[0], pool.worker_pids()[0]

    code, before, after = run_with_pool(tiny, body)
    assert code == "unsupported-language"
    assert before == after


def test_a_worker_that_cannot_load_fails_the_start(tiny: PoolConfig, tmp_path: Path) -> None:
    broken = replace(tiny, model_dir=tmp_path / "no-model-here", start_timeout=120)

    async def main() -> str:
        pool = WorkerPool(broken)
        try:
            await pool.start()
        except WorkerStartFailed as error:
            return str(error)
        await pool.close()
        return "started"

    message = asyncio.run(main())
    assert message != "started" and message


def test_closing_answers_every_call_it_abandons(tiny: PoolConfig, jfk) -> None:  # type: ignore[no-untyped-def]
    async def main() -> list[str]:
        pool = WorkerPool(replace(tiny, max_queue=4))
        await pool.start()
        calls = await start_calls(pool, jfk, 3)  # one running, two waiting
        await pool.close()
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        return [getattr(outcome, "code", "answered") for outcome in outcomes]

    assert asyncio.run(main()) == ["shutting-down"] * 3
