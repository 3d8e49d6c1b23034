"""Real speech through a real ``serve`` process: many calls at once, a worker killed in the
middle of a call, a call over its deadline, and a drain on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest
from engine import Engine, call_http, call_ws, start_engine
from speech import clips, faster_whisper_texts_as_a_worker, skill_input, word_recall

from byoa_skills.bench.scenarios.longform import word_errors
from byoa_skills.models import model_path

JFK = skill_input("jfk.wav")


def wait_for(condition, what: str, timeout: float = 300) -> None:  # type: ignore[no-untyped-def]
    """Wait until ``condition()`` holds: a wait for a state, not a measurement."""
    limit = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > limit:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def test_twelve_calls_at_once_each_get_their_own_answer(engine: Engine) -> None:
    english = clips("sentence", "en") + clips("human", "en")
    frames = [
        {
            "type": "call",
            "id": index,
            "skill": "audio.transcribe",
            "input": skill_input(english[index % len(english)]["file"]),
            "params": {"language": "en"},
        }
        for index in range(12)
    ]
    answers = asyncio.run(call_ws(engine, frames, expect=12))
    assert sorted(answer["id"] for answer in answers) == list(range(12))
    texts: dict[str, set[str]] = {}
    for answer in answers:
        clip = english[answer["id"] % len(english)]
        assert answer["ok"] is True, answer
        assert answer["receipt"] == {"cost": "0.000 USD", "provider": "local"}
        texts.setdefault(clip["file"], set()).add(answer["output"]["text"])
        # its own clip's words (the 15 s window hears 13 of en-fox.wav's 17 synthetic words)
        assert word_recall(clip["text"], answer["output"]["text"]) >= 0.7, (clip, answer)
    assert all(len(variants) == 1 for variants in texts.values())  # deterministic
    log = engine.log.read_text()
    assert "event=call skill=audio.transcribe outcome=ok" in log
    assert not any(word in log for word in ("Americans", "quick brown", "Hello world"))


def test_a_worker_killed_mid_call(engine: Engine) -> None:
    before = engine.workers()
    restarts = engine.metric("byoa_worker_restarts_total", reason="crashed")

    async def run() -> list[tuple[int, dict[str, object]]]:
        calls = [  # four, so that both workers stay busy while the test looks (short windows
            # answer a clip soon)
            asyncio.create_task(call_http(engine, "audio.transcribe", {"input": JFK}))
            for _ in range(4)
        ]
        await asyncio.to_thread(
            wait_for, lambda: engine.metric("byoa_busy_workers") == 2, "both workers busy"
        )
        os.kill(before[0], signal.SIGKILL)
        return await asyncio.gather(*calls)

    outcomes = asyncio.run(run())
    codes = sorted(str(body.get("code")) for _, body in outcomes)
    assert codes == ["None", "None", "None", "worker-crashed"]  # no other call lost
    assert sorted(status for status, _ in outcomes) == [200, 200, 200, 500]
    wait_for(lambda: len(engine.workers()) == 2, "the pool back to two workers")
    after = engine.workers()
    assert before[0] not in after and before[1] in after
    assert engine.metric("byoa_worker_restarts_total", reason="crashed") == restarts + 1
    status, body = asyncio.run(call_http(engine, "audio.transcribe", {"input": JFK}))
    assert status == 200 and "country" in body["output"]["text"].lower()


def test_a_call_over_its_deadline(engine: Engine) -> None:
    restarts = engine.metric("byoa_worker_restarts_total", reason="deadline")
    status, body = asyncio.run(
        call_http(engine, "audio.transcribe", {"input": JFK, "deadlineSeconds": 0.2})
    )
    assert (status, body["code"]) == (504, "deadline-exceeded")
    wait_for(
        lambda: engine.metric("byoa_worker_restarts_total", reason="deadline") == restarts + 1,
        "the overrunning worker replaced",
    )
    wait_for(lambda: len(engine.workers()) == 2, "the pool back to two workers")
    status, body = asyncio.run(call_http(engine, "audio.transcribe", {"input": JFK}))
    assert status == 200 and "country" in body["output"]["text"].lower()


def test_sigterm_drains_calls_in_flight(engine_home: Path) -> None:
    small = start_engine(engine_home, "--model", "tiny.en", "--workers", "1", log_name="drain.log")
    try:
        small.wait_ready()

        async def run() -> list[tuple[int, dict[str, object]]]:
            calls = [
                asyncio.create_task(call_http(small, "audio.transcribe", {"input": JFK}))
                for _ in range(3)
            ]
            await asyncio.to_thread(
                wait_for,
                lambda: small.metric("byoa_queue_depth") == 2,
                "two calls queued behind the first",
            )
            small.process.send_signal(signal.SIGTERM)
            return await asyncio.gather(*calls)

        outcomes = asyncio.run(run())
        assert [status for status, _ in outcomes] == [200, 200, 200]
        assert all("country" in body["output"]["text"].lower() for _, body in outcomes)
        assert small.process.wait(timeout=60) == 0
        log = small.log.read_text()
        assert "event=draining" in log and "event=stopped" in log
        assert "leaked" not in log  # no semaphore or shared memory left behind
    finally:
        small.stop()


@pytest.mark.encoder
def test_with_its_defaults_the_engine_answers_as_faster_whisper_called_directly(
    engine: Engine, engine_home: Path
) -> None:
    # the shared engine runs the default decode, the whole window: with CTranslate2's encoder
    # faster-whisper's own characters; with another encoder (auto's on a CPU with bf16
    # units, or forced) its words, over the set, within 5 % and none of a clip's lost
    chosen = clips("sentence") + clips("human")
    frames = [
        {
            "type": "call",
            "id": clip["file"],
            "skill": "audio.transcribe",
            "input": skill_input(clip["file"]),
            "params": {"language": clip["language"]},
        }
        for clip in chosen
    ]
    answers = {a["id"]: a for a in asyncio.run(call_ws(engine, frames, expect=len(frames)))}
    folder = model_path("base", cache_dir=engine_home / "cache" / "models")
    items = [(clip["file"], clip["language"]) for clip in chosen]
    directs = dict(zip(items, faster_whisper_texts_as_a_worker(folder, items), strict=True))
    encoder = json.loads(engine.get("/health")[1])["encoder"]
    heard = {name: answers[name]["output"]["text"] for name, _ in items}
    if encoder.startswith("ctranslate2"):
        assert heard == {name: directs[name, language] for name, language in items}
        return
    edits = [word_errors(directs[name, language], heard[name]) for name, language in items]
    assert sum(e for e, _ in edits) <= 0.05 * sum(n for _, n in edits), (encoder, heard, directs)
    for name, language in items:
        assert word_recall(directs[name, language], heard[name]) >= 0.5, (encoder, name)


def test_silence_and_noise_answer_nothing(engine: Engine) -> None:
    quiet = clips("silence") + clips("noise")
    frames = [
        {
            "type": "call",
            "id": clip["file"],
            "skill": "audio.transcribe",
            "input": skill_input(clip["file"]),
        }
        for clip in quiet
    ]
    answers = asyncio.run(call_ws(engine, frames, expect=len(frames)))
    assert {a["id"]: (a["ok"], a["output"]["text"]) for a in answers} == {
        clip["file"]: (True, "") for clip in quiet
    }
