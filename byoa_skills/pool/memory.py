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
    fields = _status_kib(pid, ("VmHWM",))
    return fields["VmHWM"] / 1024 if fields else None


def resident_split_mib(pid: int | None = None) -> dict[str, float] | None:
    """The resident memory of process ``pid`` (this process when None) now, in MiB, by kind:
    ``anon`` (its own), ``file`` (pages of mapped files: shared libraries' code, mapped
    weights, which other processes may map too) and ``shmem`` (shared memory); None where
    ``/proc/PID/status`` cannot tell."""
    fields = _status_kib(pid, ("RssAnon", "RssFile", "RssShmem"))
    if not fields:
        return None
    return {
        "anon": fields["RssAnon"] / 1024,
        "file": fields["RssFile"] / 1024,
        "shmem": fields["RssShmem"] / 1024,
    }


def _status_kib(pid: int | None, keys: tuple[str, ...]) -> dict[str, int] | None:
    """The kB values of ``keys`` in ``/proc/PID/status``; None unless every one is there."""
    path = "/proc/self/status" if pid is None else f"/proc/{pid}/status"
    found: dict[str, int] = {}
    try:
        with open(path) as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in keys:
                    found[key] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return found if len(found) == len(keys) else None
