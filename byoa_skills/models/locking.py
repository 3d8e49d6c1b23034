"""An exclusive lock between processes, held on a lock file; the system drops it when the
holder exits, however it exits."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


@contextmanager
def file_lock(path: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if absent, never removed) for the ``with``
    body, waiting as long as another process holds it; ``on_wait()`` is called once before
    waiting."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _acquire(fd, blocking=False):
            if on_wait is not None:
                on_wait()
            _acquire(fd, blocking=True)
        try:
            yield
        finally:
            _release(fd)
    finally:
        os.close(fd)


@contextmanager
def try_file_lock(path: Path) -> Iterator[bool]:
    """Take the lock on ``path`` only if it is free: the ``with`` body gets True when it holds
    the lock, False when another process does (it never waits)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        held = _acquire(fd, blocking=False)
        try:
            yield held
        finally:
            if held:
                _release(fd)
    finally:
        os.close(fd)


def _acquire(fd: int, *, blocking: bool) -> bool:
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True
    import msvcrt  # pragma: no cover - Windows

    while True:  # pragma: no cover - Windows
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            if not blocking:
                return False
            time.sleep(0.1)


def _release(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return
    import msvcrt  # pragma: no cover - Windows

    os.lseek(fd, 0, os.SEEK_SET)  # pragma: no cover - Windows
    msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # pragma: no cover - Windows
