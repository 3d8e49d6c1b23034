"""Batching across calls: calls that wait together are decoded together, give the texts
they give alone, keep their own deadlines, and a crash in a batch loses no other call."""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from speech import CLIPS, SPEECH

from byoa_skills.models import model_path
from byoa_skills.pool import CallFailure, PoolConfig, Transcription, WorkerPool
from byoa_skills.pool.pool import length_group
from byoa_skills.wav import Clip, parse_wav

SPOKEN = [c for c in CLIPS if c["kind"] not in ("silence", "noise")]
#: One spoken clip of each language and kind: a batch of several languages and lengths.
ONE_OF_EACH = list({(c["language"], c["kind"]): c for c in SPOKEN}.values())


def clip(name: str) -> Clip:
    return parse_wav((SPEECH / name).read_bytes())


@pytest.fixture(scope="module")
def base(engine_home: Path) -> PoolConfig:
    folder = model_path("base", cache_dir=engine_home / "cache" / "models")
    return PoolConfig(model_dir=folder, model_name="base", workers=1, max_queue=32)


@pytest.fixture(scope="module")
def tiny(engine_home: Path) -> PoolConfig:
    folder = model_path("tiny.en", cache_dir=engine_home / "cache" / "models")
    return PoolConfig(model_dir=folder, model_name="tiny.en", workers=1, max_queue=32)


def with_pool(config: PoolConfig, body: Any) -> Any:
    async def main() -> Any:
        pool = WorkerPool(config)
        await pool.start()
        try:
            return await asyncio.wait_for(body(pool), 300)
        finally:
            await pool.close()

    return asyncio.run(main())


async def outcome(call: Any) -> Transcription | str:
    try:
        return await call
    except CallFailure as failure:
        return failure.code


async def together(pool: WorkerPool, calls: list[tuple[Clip, str | None, float | None]]) -> list:
    """Start every call in the same moment; each one's transcription or failure code."""
    return await asyncio.gather(*(outcome(pool.transcribe(*call)) for call in calls))


def test_batched_texts_equal_one_by_one_across_languages(base: PoolConfig) -> None:
    calls = [(clip(c["file"]), c["language"], None) for c in ONE_OF_EACH]
    calls.append((clip("jfk.wav"), None, None))  # its language detected inside the batch

    async def one_by_one(pool: WorkerPool) -> list:
        return [await outcome(pool.transcribe(*call)) for call in calls]

    alone = with_pool(replace(base, max_batch=1), one_by_one)
    batched = with_pool(replace(base, max_batch=8), lambda pool: together(pool, calls))
    assert all(isinstance(t, Transcription) for t in alone + batched)
    assert [t.text for t in batched] == [t.text for t in alone]
    assert [t.language for t in batched] == [t.language for t in alone]
    assert batched[-1].language == "en"
    assert max(t.batch_size for t in batched) > 1
    assert {t.batch_size for t in alone} == {1}


def test_a_lone_call_on_an_idle_pool_does_not_wait_for_company(tiny: PoolConfig) -> None:
    # the window is far longer than the test may take: had the call waited, wait_for fails
    config = replace(tiny, workers=2, max_batch=4, batch_window=600.0)

    async def body(pool: WorkerPool) -> Transcription:
        return await asyncio.wait_for(pool.transcribe(clip("en-hello.wav"), "en"), 120)

    answer = with_pool(config, body)
    assert answer.batch_size == 1 and "hello" in answer.text.lower()


def test_a_call_within_the_window_joins_the_batch(tiny: PoolConfig) -> None:
    config = replace(tiny, max_batch=4, batch_window=3.0)

    async def body(pool: WorkerPool) -> list:
        first = asyncio.create_task(outcome(pool.transcribe(clip("en-hello.wav"), "en")))
        await asyncio.sleep(0.3)  # the idle worker took the first call and waits for others
        assert pool.queue_depth == 0 and pool.busy_workers == 0
        second = asyncio.create_task(outcome(pool.transcribe(clip("country-norway.wav"), "en")))
        return [await first, await second]

    first, second = with_pool(config, body)
    assert isinstance(first, Transcription) and isinstance(second, Transcription)
    assert first.batch_size == second.batch_size == 2
    assert "norway" in second.text.lower()


def test_a_batch_keeps_clips_of_one_length_together_and_each_deadline(tiny: PoolConfig) -> None:
    config = replace(tiny, max_batch=4)
    waiting = [
        ("en-hello.wav", 120.0),
        ("en-long.wav", 120.0),
        ("country-peru.wav", 120.0),
        ("jfk.wav", 120.0),
        ("country-kenya.wav", 0.05),
    ]

    async def body(pool: WorkerPool) -> list:
        blocker = asyncio.create_task(outcome(pool.transcribe(clip("jfk.wav"), "en")))
        while pool.busy_workers == 0:
            await asyncio.sleep(0.01)
        # these wait behind the blocker; then short clips run together, long ones together
        answers = await together(pool, [(clip(name), "en", seconds) for name, seconds in waiting])
        await blocker
        return answers

    hello, long, peru, jfk, kenya = with_pool(config, body)
    assert kenya == "deadline-exceeded"  # its deadline passed while it waited
    assert (hello.batch_size, peru.batch_size) == (2, 2)  # the 1 s clips
    assert (long.batch_size, jfk.batch_size) == (2, 2)  # the 11 and 13 s clips
    assert "hello" in hello.text.lower() and "fellow americans" in jfk.text.lower()


def test_length_groups() -> None:
    assert [length_group(int(s * 16000)) for s in (0.5, 2.0, 2.1, 6.0, 14.9, 15.0, 29.0)] == [
        0,
        0,
        1,
        1,
        2,
        2,
        3,
    ]


def test_each_call_keeps_its_own_deadline_inside_a_batch(tiny: PoolConfig) -> None:
    config = replace(tiny, max_batch=4)

    async def body(pool: WorkerPool) -> tuple[list, int]:
        blocker = asyncio.create_task(outcome(pool.transcribe(clip("jfk.wav"), "en")))
        while pool.busy_workers == 0:
            await asyncio.sleep(0.01)
        # these two wait together and run as one batch after the blocker
        answers = await together(
            pool, [(clip("jfk.wav"), "en", 0.05), (clip("jfk.wav"), "en", 120.0)]
        )
        await blocker
        return answers, pool.restarts

    (short, long), restarts = with_pool(config, body)
    assert short == "deadline-exceeded"
    assert isinstance(long, Transcription) and "country" in long.text.lower()
    assert restarts == 0  # the worker finished its batch: nothing to replace


def test_a_crash_inside_a_batch_answers_its_calls_and_loses_no_other(tiny: PoolConfig) -> None:
    config = replace(tiny, max_batch=3)

    async def body(pool: WorkerPool) -> tuple[list, int]:
        calls = [
            asyncio.create_task(outcome(pool.transcribe(clip("jfk.wav"), "en"))) for _ in range(6)
        ]
        while pool.busy_workers == 0:
            await asyncio.sleep(0.01)
        os.kill(pool.worker_pids()[0], signal.SIGKILL)
        return list(await asyncio.gather(*calls)), pool.restarts

    answers, restarts = with_pool(config, body)
    crashed = [a for a in answers if a == "worker-crashed"]
    done = [a for a in answers if isinstance(a, Transcription)]
    assert restarts == 1
    assert 1 <= len(crashed) <= 3 and len(crashed) + len(done) == 6
    assert all("country" in a.text.lower() for a in done)


def test_a_call_given_up_in_a_batch_leaves_the_others_their_answers(tiny: PoolConfig) -> None:
    config = replace(tiny, max_batch=4)

    async def body(pool: WorkerPool) -> tuple[list, int, int]:
        blocker = asyncio.create_task(outcome(pool.transcribe(clip("jfk.wav"), "en")))
        while pool.busy_workers == 0:
            await asyncio.sleep(0.01)
        calls = [
            asyncio.create_task(outcome(pool.transcribe(clip("jfk.wav"), "en"))) for _ in range(3)
        ]
        await asyncio.sleep(0.05)  # the three wait together behind the blocker
        calls[1].cancel()  # its caller gives up while it waits
        await blocker
        await asyncio.sleep(0.05)  # the other two now run as one batch
        calls[2].cancel()  # its caller gives up while the batch runs
        kept = await calls[0]
        for given_up in calls[1:]:
            with pytest.raises(asyncio.CancelledError):
                await given_up
        after = await outcome(pool.transcribe(clip("jfk.wav"), "en"))
        return [kept, after], pool.restarts, pool.busy_workers

    (kept, after), restarts, busy = with_pool(config, body)
    assert isinstance(kept, Transcription) and "country" in kept.text.lower()
    assert kept.batch_size == 2  # decoded beside the call given up in the batch
    assert isinstance(after, Transcription) and "country" in after.text.lower()
    assert restarts == 0 and busy == 0  # no worker killed, no slot left taken
