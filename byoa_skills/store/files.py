"""Private files written whole or not at all, and an advisory lock between processes.

A file written here is readable only by the user (mode 0600), in a folder this module makes
with mode 0700. A reader sees the old content or the new one, never a part: the content goes
to a temporary file in the same folder, is flushed to disk, then renamed over the old file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not on this platform (Windows): writes stay atomic, the lock does nothing
    fcntl = None  # type: ignore[assignment]

FILE_MODE = 0o600
FOLDER_MODE = 0o700


def private_folder(folder: Path) -> Path:
    """``folder``, made (with its parents) when missing; a folder made here has mode 0700.

    An existing folder is left as it is.
    """
    folder.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    return folder


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path``'s content with ``data`` atomically; the file has mode 0600 afterwards.

    On any failure the old content stays and no temporary file is left behind.
    """
    folder = private_folder(path.parent)
    temporary = folder / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    _sync_folder(folder)


@contextlib.contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``lock_path`` (made with mode 0600) for the block.

    Processes (and threads) that take the same lock run their blocks one at a time; the lock
    goes with the process if it dies. Where the platform has no ``fcntl`` the block runs
    without a lock.
    """
    private_folder(lock_path.parent)
    descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        if fcntl is not None:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def _sync_folder(folder: Path) -> None:
    # Make the rename itself durable; some platforms cannot open a folder, which is fine.
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
