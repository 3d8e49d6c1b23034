"""What ``byoa-bench`` starts ends with it: stopped by SIGTERM (as ``timeout`` and ``kill``
stop it) or SIGHUP in the middle of a run, it leaves no ``serve``, no worker and no other
server behind, nor its temporary files; and a child of a process killed outright gets
SIGTERM from the kernel."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from processes import Proc, alive, descendants, left_after

#: A generous bound for the bench's clean-ups and its serve's drain.
GONE_SECONDS = 10


def bench(out: Path, home: Path) -> subprocess.Popen[bytes]:
    """``byoa-bench --quick --model tiny.en engine``, its output in ``out``, its temporary
    files in ``out/temp``."""
    command = [
        sys.executable,
        "-m",
        "byoa_skills.bench.cli",
        "--quick",
        "--model",
        "tiny.en",
        "--calls",
        "2",
        "--repeats",
        "1",
        "--sweep",
        "1",
        "--no-plots",
        "--out",
        str(out),
        "engine",
    ]
    (out / "temp").mkdir()
    env = {**os.environ, "BYOA_SKILLS_HOME": str(home), "TMPDIR": str(out / "temp")}
    with (out / "bench.log").open("wb") as log:
        return subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def wait_for_serve(process: subprocess.Popen[bytes], seconds: float = 600) -> set[Proc]:
    """Once the bench's ``serve`` has a worker: every process below the bench."""
    limit = time.monotonic() + seconds
    while time.monotonic() < limit:
        assert process.poll() is None, "the bench ended before its serve started"
        below = descendants(process.pid)
        serving = [p for p in below if _is_serve(p.pid)]
        if serving and any(p.ppid == serving[0].pid for p in below):
            return below
        time.sleep(0.1)
    raise AssertionError("the bench never started serve")


def _is_serve(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"serve" in argv and b"byoa_skills" in argv


def kill_all(procs: set[Proc]) -> None:
    """SIGKILL whatever of ``procs`` still runs (a failed test leaves nothing behind)."""
    for proc in alive(procs):
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["term", "hup"])
def test_a_stopped_bench_leaves_no_process(tmp_path: Path, signum: signal.Signals) -> None:
    (tmp_path / "home").mkdir()
    process = bench(tmp_path, tmp_path / "home")
    started: set[Proc] = set()
    try:
        started = wait_for_serve(process)
        process.send_signal(signum)
        left = left_after(started, GONE_SECONDS)
        code = process.wait(timeout=60)
    finally:
        kill_all(started)
        if process.poll() is None:
            process.kill()
    assert not left, (left, (tmp_path / "bench.log").read_text()[-3000:])
    assert code == 128 + signum
    assert not list((tmp_path / "temp").glob("byoa-bench-*"))  # its temporary home is gone
    assert (tmp_path / "logs" / "serve.log").is_file()  # its engine's log kept


IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
)


@pytest.mark.parametrize(
    ("child", "death"),
    [
        ("import time; time.sleep(600)", ""),
        # a server that does not end on SIGTERM (llama-cpp-python's with a request running)
        (IGNORES_SIGTERM, ", death_signal=signal.SIGKILL"),
    ],
)
def test_a_child_ends_when_its_parent_is_killed(tmp_path: Path, child: str, death: str) -> None:
    parent_code = (
        "import signal, sys, time\n"
        "from byoa_skills.bench.children import spawn\n"
        f"child = spawn([sys.executable, '-c', {child!r}]{death})\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE)
    started: set[Proc] = set()
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        started = {p for p in descendants(parent.pid) if p.pid == child_pid}
        assert started
        parent.kill()  # no clean-up can run: the kernel's parent-death signal must
        parent.wait()
        left = left_after(started, GONE_SECONDS)
    finally:
        kill_all(started)
        if parent.poll() is None:
            parent.kill()
    assert left == set()
