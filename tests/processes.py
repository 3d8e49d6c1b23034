"""The processes a test started, read from /proc (Linux): who descends from whom, which
session they share, whether they are gone, and what shared memory a process maps."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Proc:
    """One process, named by its pid and its start time (so a reused pid is another)."""

    pid: int
    started: int
    ppid: int
    session: int
    name: str


def _read(pid: int) -> tuple[Proc, str] | None:
    """The process ``pid`` and its state letter; None when it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    # state ppid pgrp session ... starttime is the 20th field after the name
    return Proc(pid, int(fields[19]), int(fields[1]), int(fields[3]), name), fields[0]


def processes() -> list[Proc]:
    """Every process alive now (zombies left out: they have ended)."""
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            read = _read(int(entry.name))
            if read is not None and read[1] != "Z":
                found.append(read[0])
    return found


def descendants(pid: int) -> set[Proc]:
    """The processes below ``pid`` now: its children, theirs, and so on."""
    everyone = processes()
    found: set[Proc] = set()
    parents = {pid}
    while parents:
        children = {p for p in everyone if p.ppid in parents and p not in found}
        found |= children
        parents = {p.pid for p in children}
    return found


def in_session(session: int) -> set[Proc]:
    """The processes of session ``session`` now, wherever they were moved since."""
    return {p for p in processes() if p.session == session}


def alive(procs: set[Proc]) -> set[Proc]:
    """Those of ``procs`` still running (the same pid with the same start time)."""
    left = set()
    for proc in procs:
        read = _read(proc.pid)
        if read is not None and read[1] != "Z" and read[0].started == proc.started:
            left.add(proc)
    return left


def left_after(procs: set[Proc], seconds: float) -> set[Proc]:
    """Those of ``procs`` still running ``seconds`` from now, or none as soon as all end."""
    limit = time.monotonic() + seconds
    while (left := alive(procs)) and time.monotonic() < limit:
        time.sleep(0.1)
    return left


def shared_memory(pid: int) -> set[Path]:
    """The files under /dev/shm that process ``pid`` maps now."""
    try:
        maps = (PROC / str(pid) / "maps").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return set()
    return {
        Path(line.split(maxsplit=5)[5].removesuffix(" (deleted)"))
        for line in maps.splitlines()
        if len(line.split(maxsplit=5)) == 6 and line.split(maxsplit=5)[5].startswith("/dev/shm/")
    }
