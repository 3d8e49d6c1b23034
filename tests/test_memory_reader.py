"""The one reader of a process's resident memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from byoa_skills.bench.scenarios.memory import ranked_ratios
from byoa_skills.bench.server import rss_mib as bench_rss_mib
from byoa_skills.pool.memory import resident_split_mib, rss_mib


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


def test_the_split_tells_a_processs_own_memory_from_a_mapped_files_pages(tmp_path: Path) -> None:
    """A child that fills 100 MiB of its own and then reads a 60 MiB file it maps: the first
    shows in its own memory, the second in mapped files', and the kinds add up to its RSS."""
    data = tmp_path / "weights.bin"
    data.write_bytes(os.urandom(60 * 2**20))
    code = (
        "import mmap, sys; b = bytearray(100 * 2**20); b[::4096] = b'x' * len(b[::4096]); "
        "print(1, flush=True); sys.stdin.readline(); f = open(sys.argv[1], 'rb'); "
        "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); s = sum(m[::4096]); "
        "print(2, flush=True); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(data)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "1"
        before = resident_split_mib(child.pid)
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "2"
        after = resident_split_mib(child.pid)
        total = rss_mib(child.pid)
        assert before is not None and after is not None and total is not None
        assert before["anon"] > 100
        assert after["file"] - before["file"] > 55
        assert abs(after["anon"] - before["anon"]) < 5
        assert sum(after.values()) == pytest.approx(total, abs=1)
    finally:
        child.kill()
        child.wait()
    assert resident_split_mib(child.pid) is None


def test_each_peak_is_set_against_the_one_of_the_same_rank() -> None:
    ours = {"11": 400.0, "10": 500.0}  # the worker with the lone call's encoder first or not
    theirs = {"20": 360.0, "21": 600.0}
    assert ranked_ratios(ours, theirs) == [pytest.approx(500 / 600, abs=1e-3), 1.111]
    assert ranked_ratios(ours, {"20": 360.0}) is None
    assert ranked_ratios(ours, {"20": 360.0, "21": 0.0}) is None
