"""A lone call gets the machine: with every other worker idle and nothing waiting, the call
runs on the worker that keeps an encoder on the idle cores; its deadline and a worker's death
are handled as for any call."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from poolkit import run_with_pool

from byoa_skills.models import model_path
from byoa_skills.pool import DeadlineExceeded, PoolConfig, Transcription, WorkerCrashed, WorkerPool
from byoa_skills.wav import Clip, parse_wav

SPEECH = Path(__file__).parent / "data" / "speech"


def clip(*files: str) -> Clip:
    return Clip(np.concatenate([parse_wav((SPEECH / f).read_bytes()).samples for f in files]))


@pytest.fixture(scope="module")
def two(engine_home: Path) -> PoolConfig:
    """Two single-threaded base workers; a lone call's encoder on 2 threads."""
    folder = model_path("base", cache_dir=engine_home / "cache" / "models")
    return PoolConfig(model_dir=folder, workers=2, lone_call_threads=2, idle_release=0)


@pytest.fixture(scope="module")
def slow(two: PoolConfig) -> PoolConfig:
    """The same pool on the whole 30 s window, so that a long clip takes seconds."""
    return PoolConfig(
        model_dir=two.model_dir,
        workers=2,
        lone_call_threads=2,
        encoder_seconds=30.0,
        idle_release=0,
    )


async def running_on(pool: WorkerPool, task: asyncio.Task[Transcription]) -> int:
    """The pid of the worker that took ``task``'s call, once it runs."""
    while pool.busy_workers == 0 and not task.done():
        await asyncio.sleep(0.005)
    assert not task.done()
    busy = [s for s in pool._supervisor.slots if s.busy]
    assert len(busy) == 1 and busy[0].worker is not None and busy[0].worker.pid
    return busy[0].worker.pid


async def settled(pool: WorkerPool) -> None:
    """Return once both workers are warm and both slots wait for a call."""
    while pool.warm_workers < 2 or not all(s.waiting for s in pool._supervisor.slots):
        await asyncio.sleep(0.02)


def test_a_lone_call_runs_on_the_wide_encoder_and_calls_together_do_not(two: PoolConfig) -> None:
    jfk, fox = clip("jfk.wav"), clip("en-fox.wav")

    async def body(pool: WorkerPool) -> tuple[list[Transcription], list[Transcription]]:
        alone = [await pool.transcribe(jfk, "en") for _ in range(3)]
        together = await asyncio.gather(*(pool.transcribe(fox, "en") for _ in range(4)))
        return alone, list(together)

    alone, together = run_with_pool(two, body)
    assert all(a.lone and a.transcript.encoder_threads == 2 for a in alone)
    assert all("your country" in a.text.lower() for a in alone)
    assert len({a.worker_pid for a in alone}) == 1  # always the worker with the wide encoder
    # four at once on two workers: the two that start together are not lone calls, and a
    # call runs as one only once every other call has ended (the four arrived together, so
    # each one's start and end are its queued and total seconds)
    ordered = sorted(together, key=lambda a: a.queued_seconds)
    assert not ordered[0].lone and not ordered[1].lone
    for lone in (a for a in together if a.lone):
        others = [a for a in together if a is not lone]
        assert all(a.seconds <= lone.queued_seconds + 0.01 for a in others)
    assert {a.transcript.encoder_threads for a in together if not a.lone} == {1}
    assert len({a.worker_pid for a in together}) == 2
    assert len({a.text for a in together}) == 1  # the same words however it was encoded


def test_a_lone_call_keeps_its_deadline(slow: PoolConfig) -> None:
    long = clip("en-long.wav", "jfk.wav")

    async def body(pool: WorkerPool) -> tuple[str, int, int, list[int], Transcription]:
        wide_pid = pool._supervisor.slots[0].worker.pid  # type: ignore[union-attr]
        task = asyncio.create_task(pool.transcribe(long, "en", deadline=0.4))
        took = await running_on(pool, task)
        with pytest.raises(DeadlineExceeded) as failure:
            await task
        await settled(pool)
        after = await pool.transcribe(clip("jfk.wav"), "en")
        return failure.value.code, wide_pid, took, pool.worker_pids(), after

    code, wide_pid, took, pids, after = run_with_pool(slow, body)
    assert code == "deadline-exceeded"
    assert took == wide_pid and wide_pid not in pids  # it ran there, overran, was replaced
    assert after.lone and after.worker_pid == pids[0] and "country" in after.text.lower()


def test_a_lone_call_is_answered_when_its_worker_dies_in_the_middle(slow: PoolConfig) -> None:
    long = clip("en-long.wav", "jfk.wav")

    async def body(pool: WorkerPool) -> tuple[str, int, int, list[int], Transcription]:
        wide_pid = pool._supervisor.slots[0].worker.pid  # type: ignore[union-attr]
        task = asyncio.create_task(pool.transcribe(long, "en"))
        took = await running_on(pool, task)
        await asyncio.sleep(0.2)  # in the middle of its encode or decode
        os.kill(took, signal.SIGKILL)
        with pytest.raises(WorkerCrashed) as failure:
            await task
        await settled(pool)
        after = await pool.transcribe(clip("jfk.wav"), "en")
        return failure.value.code, wide_pid, took, pool.worker_pids(), after

    code, wide_pid, took, pids, after = run_with_pool(slow, body)
    assert code == "worker-crashed"
    assert took == wide_pid and wide_pid not in pids
    assert after.lone and after.transcript.encoder_threads == 2 and "country" in after.text.lower()
