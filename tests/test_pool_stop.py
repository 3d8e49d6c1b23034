"""Every state of the pool's life can stop: SIGINT or SIGTERM ends a real ``serve`` within
a few seconds whether its workers are warming, warm, let go or waking, and leaves no process
it started and no shared memory behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from engine import TOKEN, Engine, start_engine
from grants import GEO_MANIFEST, grant
from processes import Proc, alive, in_session, left_after, shared_memory

#: A generous bound on "within a few seconds": a worker still loading its model may take
#: the stop grace (5 s) before it is terminated.
EXIT_SECONDS = 20


def small_engine(home: Path, log_name: str, idle_release: str = "2") -> Engine:
    """``serve`` with one ``tiny.en`` worker, let go after ``idle_release`` idle seconds."""
    return start_engine(
        home,
        "--model",
        "tiny.en",
        "--workers",
        "1",
        "--idle-release",
        idle_release,
        log_name=log_name,
    )


def wait_for_line(engine: Engine, text: str, seconds: float = 300) -> None:
    """Wait until the engine's log has ``text`` (a readiness wait, not a measurement)."""
    limit = time.monotonic() + seconds
    while text not in engine.log.read_text(errors="replace"):
        assert engine.process.poll() is None, engine.log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < limit, f"no {text!r} in the log"
        time.sleep(0.05)


def wait_until_let_go(engine: Engine, seconds: float = 300) -> None:
    """Wait until the engine has let its workers go and every worker it started has ended."""
    wait_for_line(engine, "event=workers-released", seconds)
    text = engine.log.read_text(errors="replace")
    workers = {int(pid) for pid in re.findall(r"event=worker-ready slot=\d+ pid=(\d+)", text)}
    assert workers
    limit = time.monotonic() + seconds
    while any(Path(f"/proc/{pid}").exists() for pid in workers):
        assert time.monotonic() < limit, "the workers let go never ended"
        time.sleep(0.05)


def stop_and_look(engine: Engine, signum: signal.Signals) -> tuple[int | None, set[Proc], set]:
    """Send ``signum``; the exit status within :data:`EXIT_SECONDS` (None: still running),
    the processes of its session still running, and the shared memory it mapped still
    present. Whatever is left is killed afterwards."""
    pid = engine.process.pid
    limit = time.monotonic() + 60
    while not (memory := shared_memory(pid)):  # the slots are made as the pool starts
        assert time.monotonic() < limit, "the engine maps no shared memory"
        time.sleep(0.05)
    started = {p for p in in_session(pid) if p.pid != pid}
    engine.process.send_signal(signum)
    try:
        code: int | None = engine.process.wait(timeout=EXIT_SECONDS)
    except subprocess.TimeoutExpired:
        code = None
    left = left_after(started | in_session(pid), 10) if code is not None else alive(started)
    if code is None:
        engine.process.kill()
        engine.process.wait()
    for proc in alive(in_session(pid)):
        with_signal(proc.pid, signal.SIGKILL)
    kept = {path for path in memory if path.exists()}
    return code, left, kept


def with_signal(pid: int, signum: signal.Signals) -> None:
    """Send ``signum`` to ``pid`` if it still runs."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def ask_for_grant(engine: Engine) -> None:
    """POST /v1/grants for ``audio.transcribe`` (it wakes the workers); the answer is not
    read: the engine may stop first."""
    body = json.dumps(
        {"origin": "https://geo.example.org", "manifest": GEO_MANIFEST, "grant": grant()}
    ).encode()
    request = urllib.request.Request(f"{engine.url}/v1/grants", data=body, method="POST")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            answer.read()
    except (urllib.error.URLError, OSError):
        pass


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["int", "term"])
def test_serve_let_go_stops_on_a_signal(engine_home: Path, signum: signal.Signals) -> None:
    engine = small_engine(engine_home, f"let-go-{signum.name}.log")
    try:
        engine.wait_ready()
        wait_until_let_go(engine)
        code, left, kept = stop_and_look(engine, signum)
    finally:
        engine.stop()
    assert code == 0, engine.log.read_text(errors="replace")[-2000:]
    assert not left and not kept
    assert "event=stopped" in engine.log.read_text()


def test_serve_warm_stops_on_a_signal(engine_home: Path) -> None:
    engine = small_engine(engine_home, "warm-stop.log", idle_release="0")
    try:
        engine.wait_ready()
        assert engine.workers()
        code, left, kept = stop_and_look(engine, signal.SIGINT)
    finally:
        engine.stop()
    assert (code, left, kept) == (0, set(), set())


def test_serve_warming_stops_on_a_signal(engine_home: Path) -> None:
    engine = small_engine(engine_home, "warming-stop.log")
    try:
        wait_for_line(engine, "event=listening")
        code, left, kept = stop_and_look(engine, signal.SIGTERM)
    finally:
        engine.stop()
    assert "event=ready" not in engine.log.read_text(), "it stopped before it was warm"
    assert (code, left, kept) == (0, set(), set())


def test_serve_waking_stops_on_a_signal(engine_home: Path) -> None:
    engine = small_engine(engine_home, "waking-stop.log")
    try:
        engine.wait_ready()
        wait_until_let_go(engine)
        asking = threading.Thread(target=ask_for_grant, args=(engine,), daemon=True)
        asking.start()
        wait_for_line(engine, "event=workers-woken")
        code, left, kept = stop_and_look(engine, signal.SIGTERM)
        asking.join(60)
    finally:
        engine.stop()
    assert (code, left, kept) == (0, set(), set())


def page_request(engine: Engine, origin: str, answers: list[object]) -> None:
    """A page's request (with a click) for ``audio.transcribe``: it waits for the visitor's
    consent; what the page got is put in ``answers`` (None: the engine went first)."""
    body = json.dumps({"origin": origin, "manifest": GEO_MANIFEST, "userActivation": True}).encode()
    request = urllib.request.Request(f"{engine.url}/v1/extension/request", data=body, method="POST")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=300) as answer:
            answers.append(json.loads(answer.read())["grant"])
    except (urllib.error.URLError, OSError):
        answers.append("no answer")


@pytest.mark.parametrize("waiting", [1, 8])
def test_a_stop_never_waits_on_the_visitor(engine_home: Path, waiting: int) -> None:
    # consents wait 120 s for the visitor; SIGTERM answers them as unanswered at once
    engine = small_engine(engine_home, f"stop-consents-{waiting}.log", idle_release="0")
    answers: list[object] = []
    try:
        engine.wait_ready()
        askers = [
            threading.Thread(
                target=page_request, args=(engine, f"https://game.party{n}.example", answers)
            )
            for n in range(waiting)
        ]
        for asker in askers:
            asker.start()
        limit = time.monotonic() + 60
        while engine.log.read_text(errors="replace").count("event=consent-open") < waiting:
            assert time.monotonic() < limit, "the consents never opened"
            time.sleep(0.05)
        code, left, kept = stop_and_look(engine, signal.SIGTERM)
        for asker in askers:
            asker.join(timeout=30)
    finally:
        engine.stop()
    log = engine.log.read_text(errors="replace")
    assert code == 0, log[-2000:]
    assert not left and not kept
    assert answers == [None] * waiting
    assert f"event=consents-closed count={waiting}" in log
