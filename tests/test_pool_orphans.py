"""The pool's workers end with the process that started them, even when it is killed
(SIGKILL) while a worker is deep in a call: nothing of theirs is left running, holding a
model's memory, parent 1. (An idle worker ends anyway, as its pipe closes; a busy one does
not read its pipe until its call ends.)"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from processes import Proc, alive, in_session, processes

from byoa_skills.models import model_path

#: A program that starts a real pool of two ``tiny.en`` workers, gives one a call that never
#: ends, prints both pids on one line once that call runs, and waits to be killed. Spawned
#: workers import this file too (as ``__mp_main__``): there the call is made endless, as a
#: model stuck in its native code would be, so that worker never reads its pipe again.
POOL_PROGRAM = """
import asyncio, sys, time
from importlib import resources
from pathlib import Path

from byoa_skills.pool import PoolConfig, WorkerPool, worker_main
from byoa_skills.wav import parse_wav

def endless(*args, **kwargs):
    time.sleep(3600)

async def main() -> None:
    config = PoolConfig(model_dir=Path(sys.argv[1]), model_name="tiny.en", workers=2)
    pool = WorkerPool(config)
    await pool.start()
    clip = parse_wav(resources.files("byoa_skills.pool").joinpath("warmup.wav").read_bytes())
    call = asyncio.ensure_future(pool.transcribe(clip, "en"))
    while pool.busy_workers == 0:
        await asyncio.sleep(0.01)
    print(" ".join(str(pid) for pid in pool.worker_pids()), flush=True)
    await call

if __name__ == "__main__":
    asyncio.run(main())
else:
    worker_main._answers = endless
"""

#: A generous bound on the wait for the workers to end (a readiness wait, not a measure).
GONE_WITHIN = 30.0


def first_line(process: subprocess.Popen[str], seconds: float) -> str:
    """The first line ``process`` prints, or "" if none comes within ``seconds``."""
    lines: list[str] = []
    reading = threading.Thread(
        target=lambda: lines.append(process.stdout.readline()),  # type: ignore[union-attr]
        daemon=True,
    )
    reading.start()
    reading.join(seconds)
    return lines[0].strip() if lines else ""


def by_pid(pids: set[int]) -> set[Proc]:
    """The processes now running with these pids."""
    return {proc for proc in processes() if proc.pid in pids}


def test_workers_end_when_their_parent_is_killed(engine_home: Path, tmp_path: Path) -> None:
    folder = model_path("tiny.en", cache_dir=engine_home / "cache" / "models")
    program = tmp_path / "pool_program.py"
    program.write_text(POOL_PROGRAM)
    parent = subprocess.Popen(
        [sys.executable, str(program), str(folder)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so that whatever is left can be found, and cleaned up
    )
    try:
        line = first_line(parent, 300)
        assert line, f"the pool never started (exit {parent.poll()})"
        workers = by_pid({int(pid) for pid in line.split()})
        assert len(workers) == 2 and all(w.ppid == parent.pid for w in workers)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        limit = time.monotonic() + GONE_WITHIN
        while alive(workers) and time.monotonic() < limit:
            time.sleep(0.1)
        assert not alive(workers), "the workers outlived their killed parent"
    finally:
        with contextlib.suppress(ProcessLookupError):
            parent.kill()
        parent.wait()
        for proc in in_session(parent.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
