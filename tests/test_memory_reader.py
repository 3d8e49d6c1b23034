"""The one reader of a process's resident memory."""

from __future__ import annotations

import os
import subprocess
import sys

from byoa_skills.bench.server import rss_mib as bench_rss_mib
from byoa_skills.pool.memory import rss_mib


def test_it_reads_this_process_another_and_none_for_one_that_is_gone() -> None:
    mine = rss_mib()
    assert mine is not None and mine > 1
    assert rss_mib(os.getpid()) is not None
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    gone = int(ended.stdout)
    assert rss_mib(gone) is None
    assert bench_rss_mib(gone) == 0.0


def test_a_process_that_takes_memory_reads_higher() -> None:
    code = (
        "import sys; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); "
        "print(1); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "1"
        held = rss_mib(child.pid)
        assert held is not None and held > 150
    finally:
        child.kill()
        child.wait()
