"""How much memory a process holds: the one reader of a process's resident set, for the
workers (which report it with each answer), the wallet's engine view and ``byoa-bench``."""

from __future__ import annotations

import os


def rss_mib(pid: int | None = None) -> float | None:
    """The resident memory of process ``pid`` (this process when None), in MiB, as
    ``/proc/PID/statm`` tells it; None where it cannot be read (the process is gone, or the
    system has no ``/proc``)."""
    path = "/proc/self/statm" if pid is None else f"/proc/{pid}/statm"
    try:
        with open(path) as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mib(pid: int | None = None) -> float | None:
    """The most resident memory process ``pid`` (this process when None) has held, in MiB,
    as ``/proc/PID/status`` tells it (``VmHWM``); None where it cannot be read."""
    path = "/proc/self/status" if pid is None else f"/proc/{pid}/status"
    try:
        with open(path) as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
