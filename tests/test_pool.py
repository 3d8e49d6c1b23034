"""The warm pool in this process: bounded queue, recycling, draining, start failures, and the
settings that configure it (checked without any model)."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import pickle
import random
import shutil
import signal
from dataclasses import replace
from pathlib import Path

import pytest
from poolkit import run_with_pool

from byoa_skills.cli import build_parser, main
from byoa_skills.commands.serve import pool_config
from byoa_skills.models import model_path
from byoa_skills.pool import (
    DEFAULT_ENCODER_SECONDS,
    Backend,
    CallFailure,
    Device,
    PoolConfig,
    QueueFull,
    ShuttingDown,
    SkillUnavailable,
    TranscribeFailed,
    WorkerPool,
    WorkerStartFailed,
)
from byoa_skills.pool.config import available_cores, recycle_threshold
from byoa_skills.runtimes.speech import DecodeOptions, Transcript
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

    # a jitter of 10 % moves a threshold of 2 by less than one call
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


def test_a_killed_worker_is_not_counted_warm_until_its_replacement_is(
    tiny: PoolConfig, jfk
) -> None:  # type: ignore[no-untyped-def]
    async def body(pool: WorkerPool) -> tuple[int, int, int, bool]:
        warm_at_start = pool.warm_workers
        os.kill(pool.worker_pids()[0], signal.SIGKILL)
        while pool.worker_pids() and pool.warm_workers == warm_at_start:
            await asyncio.sleep(0.01)
        warm_meanwhile = pool.warm_workers
        while pool.warm_workers < 1:
            await asyncio.sleep(0.05)
        answer = await pool.transcribe(jfk, "en")
        return warm_at_start, warm_meanwhile, pool.warm_workers, "country" in answer.text.lower()

    assert run_with_pool(tiny, body) == (1, 0, 1, True)


def test_an_answer_carries_the_runtime_transcript_and_the_pool_timing(
    tiny: PoolConfig, jfk
) -> None:  # type: ignore[no-untyped-def]
    async def body(pool: WorkerPool):  # type: ignore[no-untyped-def]
        return await pool.transcribe(jfk, None), pool.worker_pids()

    answer, pids = run_with_pool(tiny, body)
    assert isinstance(answer.transcript, Transcript)
    assert (answer.text, answer.language) == (answer.transcript.text, "en")
    assert answer.language_probability == answer.transcript.language_probability > 0.5
    assert answer.inference_seconds == answer.transcript.seconds > 0
    assert (
        answer.seconds >= answer.queued_seconds >= 0 and answer.seconds >= answer.inference_seconds
    )
    assert answer.worker_pid == pids[0] and answer.batch_size == 1


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


async def outcome(call) -> str:  # type: ignore[no-untyped-def]
    try:
        await call
    except CallFailure as failure:
        return failure.code
    return "answered"


def test_a_slot_whose_worker_keeps_failing_to_start_gives_up(
    tiny: PoolConfig,
    jfk,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
) -> None:
    private = tmp_path / "tiny.en"
    shutil.copytree(tiny.model_dir, private)
    config = replace(
        tiny, model_dir=private, max_queue=4, max_start_failures=3, restart_backoff=0.05
    )
    events: list[str] = []

    async def main() -> dict[str, object]:
        pool = WorkerPool(config, on_event=lambda kind, value: events.append(kind))
        await pool.start()
        try:
            first = await outcome(pool.transcribe(jfk, "en"))
            shutil.rmtree(private)  # every worker started from now on fails to load
            os.kill(pool.worker_pids()[0], signal.SIGKILL)
            while "worker-restart" not in events:  # the slot noticed and is restarting
                await asyncio.sleep(0.01)
            queued = await outcome(pool.transcribe(jfk, "en"))
            late = await outcome(pool.transcribe(jfk, "en"))
            failed_starts = events.count("worker-start-failed")
            await asyncio.sleep(1.0)  # 20 times the first back-off: no slot tries again
            return {
                "first": first,
                "queued": queued,
                "late": late,
                "ready": pool.ready,
                "failed_starts": failed_starts,
                "failed_starts_later": events.count("worker-start-failed"),
                "pids": pool.worker_pids(),
                "children": multiprocessing.active_children(),
            }
        finally:
            await pool.close()

    with caplog.at_level(logging.ERROR, logger="byoa_skills.pool"):
        seen = asyncio.run(main())
    assert seen["first"] == "answered"
    assert seen["queued"] == seen["late"] == SkillUnavailable.code == "skill-unavailable"
    assert seen["ready"] is False
    assert seen["failed_starts"] == seen["failed_starts_later"] == 3
    assert events.count("worker-restart") == events.count("worker-gave-up") == 1
    assert seen["pids"] == [] and seen["children"] == []
    gave_up = [r.getMessage() for r in caplog.records if "event=worker-gave-up" in r.getMessage()]
    assert len(gave_up) == 1 and gave_up[0].startswith("event=worker-gave-up slot=0 error=")


def test_each_worker_draws_its_own_recycle_threshold(tiny: PoolConfig) -> None:
    config = replace(tiny, workers=2, recycle_after_calls=2, recycle_jitter=0.5)

    def draws(seed: int) -> list[int]:
        rng = random.Random(seed)
        return [recycle_threshold(2, 0.5, rng) for _ in range(2)]

    seed = next(seed for seed in range(100) if len(set(draws(seed))) == 2)
    hello = parse_wav((SPEECH / "en-hello.wav").read_bytes())
    events: list[tuple[str, object]] = []

    async def main() -> tuple[list[int], int]:
        pool = WorkerPool(
            config,
            on_event=lambda kind, value: events.append((kind, value)),
            rng=random.Random(seed),
        )
        await pool.start()
        try:
            thresholds = pool.recycle_thresholds()
            for _ in range(5):  # enough for a worker with a threshold of 3 or less to recycle
                await pool.transcribe(hello, "en")
            return thresholds, pool.restarts
        finally:
            await pool.close()

    thresholds, restarts = asyncio.run(main())
    assert thresholds == draws(seed) and len(set(thresholds)) == 2
    assert restarts >= 1 and ("worker-restart", "recycled") in events


# --- settings, without a model ------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "flag"),
    [
        ({"workers": 0}, "--workers"),
        ({"threads_per_worker": 0}, "--threads"),
        ({"max_queue": 0}, "--queue"),
        ({"max_batch": 0}, "--max-batch"),
        ({"batch_window": -0.001}, "--batch-window-ms"),
        ({"encoder_seconds": 0.0}, "--encoder-seconds"),
        ({"encoder_seconds": 31.0}, "--encoder-seconds"),
        ({"backend": "onnx"}, "--backend"),
        ({"device": "tpu"}, "--device"),
        ({"device": "auto"}, "--device auto"),
        ({"backend": "torch", "encoder_seconds": 15.0}, "--encoder-seconds"),
        ({"default_deadline": 0}, "default_deadline"),
        ({"start_timeout": -1.0}, "start_timeout"),
        ({"stop_grace": 0.0}, "stop_grace"),
        ({"max_start_failures": 0}, "max_start_failures"),
        ({"restart_backoff": 0.0}, "restart_backoff"),
        ({"recycle_jitter": 1.0}, "recycle_jitter"),
        ({"max_queue": 1.5}, "--queue"),
        ({"workers": True}, "--workers"),
    ],
)
def test_a_setting_no_pool_can_run_with_is_refused_naming_its_flag(
    setting: dict[str, object], flag: str
) -> None:
    with pytest.raises(ValueError) as refused:
        PoolConfig(model_dir=Path("m"), **setting)  # type: ignore[arg-type]
    message = str(refused.value)
    assert message.startswith(flag) and "\n" not in message


def test_backend_and_device_are_enums_equal_to_their_names() -> None:
    config = PoolConfig(model_dir=Path("m"), backend="torch", device="cuda", encoder_seconds=None)
    assert config.backend is Backend.TORCH and config.device is Device.CUDA
    assert config.backend == "torch" and f"{config.device}" == "cuda"
    assert pickle.loads(pickle.dumps(config)) == config
    assert config.decode_options().beam_size == 1
    assert (
        PoolConfig(model_dir=Path("m"), encoder_seconds=15).decode_options().encoder_seconds == 15
    )


def test_recycle_thresholds_spread_around_the_setting() -> None:
    rng = random.Random(1)
    thresholds = [recycle_threshold(10_000, 0.1, rng) for _ in range(8)]
    assert all(9_000 <= t <= 11_000 for t in thresholds) and len(set(thresholds)) > 1
    assert recycle_threshold(1, 0.9, rng) >= 1
    assert recycle_threshold(0, 0.1, rng) == 0  # never recycle stays never
    assert recycle_threshold(100, 0.0, rng) == 100


def test_the_engine_flags_take_their_defaults_from_the_pool_config() -> None:
    args = build_parser().parse_args(["serve"])
    assert args.queue == PoolConfig.max_queue
    assert (args.workers, args.threads, args.max_batch) == (None, None, None)  # tuned or default
    assert (args.backend, args.device) == (PoolConfig.backend, PoolConfig.device)
    cpu = pool_config(args, "tiny.en", Path("m"), "cpu")
    assert (cpu.workers, cpu.max_batch, cpu.device) == (available_cores(), 1, Device.CPU)
    assert cpu.threads_per_worker == PoolConfig.threads_per_worker
    assert (cpu.batch_window, cpu.encoder_seconds) == (0.0, None)
    assert DEFAULT_ENCODER_SECONDS == 30.0  # the whole window, words first
    assert cpu.encoder_window is None and cpu.decode_options() == DecodeOptions()
    short = pool_config(
        build_parser().parse_args(["serve", "--encoder-seconds", "15"]), "base", Path("m"), "cpu"
    )
    assert short.encoder_window == 15.0 == short.decode_options().encoder_seconds
    whole = pool_config(
        build_parser().parse_args(["serve", "--encoder-seconds", "30"]), "tiny.en", Path("m"), "cpu"
    )
    assert whole.encoder_window is None and whole.decode_options().encoder_seconds is None
    torch = replace(cpu, backend=Backend.TORCH)
    assert torch.encoder_window is None and torch.decode_options().encoder_seconds is None
    cuda = pool_config(args, "tiny.en", Path("m"), "cuda")
    assert (cuda.workers, cuda.max_batch) == (1, 16)
    args = build_parser().parse_args(["serve", "--batch-window-ms", "250", "--queue", "3"])
    config = pool_config(args, "tiny.en", Path("m"), "cpu")
    assert (config.batch_window, config.max_queue) == (0.25, 3)


@pytest.mark.parametrize(
    "flags",
    [
        ["--queue", "0"],
        ["--workers", "0"],
        ["--threads", "two"],
        ["--max-batch", "0"],
        ["--batch-window-ms", "-1"],
        ["--encoder-seconds", "0.5"],
        ["--backend", "onnx"],
        ["--device", "tpu"],
    ],
)
def test_a_bad_engine_flag_is_a_usage_error(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", *flags])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert exited.value.code == 2
    assert error.startswith(f"byoa-skills serve: error: argument {flags[0]}: ")
    assert repr(flags[1]) in error


def test_flags_that_cannot_go_together_are_refused_before_the_model_is_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path))
    status = main(["serve", "--backend", "torch", "--encoder-seconds", "15", "--model", "base"])
    assert status == 2
    assert "--encoder-seconds is not supported by --backend torch" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing fetched, nothing written
