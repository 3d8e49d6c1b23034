"""Private files written whole or not at all, and an advisory lock between processes.

A file written here is readable only by the user (mode 0600), in a folder this module makes
with mode 0700. A reader sees the old content or the new one, never a part: the content goes
to a temporary file in the same folder, is flushed to disk, then renamed over the old file.

A folder or a secret file someone else could have planted or could change is refused with
:class:`UnsafePathError`, never used: a folder owned by another user or writable by every
user, a secret file that is not a regular file of the user's with no access for others.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not on this platform (Windows): writes stay atomic, the lock does nothing
    fcntl = None  # type: ignore[assignment]

FILE_MODE = 0o600
FOLDER_MODE = 0o700
#: Mode bits that let another user change what a folder holds.
_OTHERS_WRITE = 0o002
#: Mode bits that let anyone but the user reach a secret file.
_NOT_OWNER = 0o077
#: The most bytes of a secret file read.
_MAX_SECRET_BYTES = 64 * 1024


class UnsafePathError(PermissionError):
    """A folder or a file the engine will not use because someone else owns it or may change
    or read it; the message says which and how to fix it."""


def private_folder(folder: Path) -> Path:
    """``folder``, made (with its parents) when missing; a folder made here has mode 0700.

    An existing folder is left as it is if it is the user's and not writable by every user;
    otherwise :class:`UnsafePathError`.
    """
    folder.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    check_folder(folder)
    return folder


def check_folder(folder: Path) -> None:
    """Refuse (:class:`UnsafePathError`) a folder owned by another user or writable by every
    user (such as mode 0777): whoever else can write there can plant or swap its files."""
    info = folder.stat()
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise UnsafePathError(
            f"{folder} belongs to another user (uid {info.st_uid}); the engine uses only "
            "folders of its own user: remove it or give it to this user"
        )
    if info.st_mode & _OTHERS_WRITE:
        raise UnsafePathError(
            f"{folder} is writable by every user (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"the engine will not use it: chmod 700 {folder}"
        )


def read_secret(path: Path) -> bytes:
    """The content of a secret file (a token, a key): a regular file, not a link, owned by the
    user, with no access for the group or others (0600 or stricter); otherwise
    :class:`UnsafePathError`. ``FileNotFoundError`` when there is none. A file that holds only
    whitespace is returned as it is, whoever made it: it carries no secret, and the caller
    replaces it (atomically, with a file of its own)."""
    check_folder(path.parent)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        if path.is_symlink():
            raise UnsafePathError(
                f"{path} is a symbolic link; the engine will not follow it"
            ) from None
        raise error
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePathError(f"{path} is not a regular file")
        data = file.read(_MAX_SECRET_BYTES)
        if not data.strip():
            return data  # holds no secret: the caller writes a new file in its place
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise UnsafePathError(
                f"{path} belongs to another user (uid {info.st_uid}); whoever made it would "
                "hold the secret: remove it and let the engine make a new one"
            )
        if os.name == "posix" and info.st_mode & _NOT_OWNER:
            raise UnsafePathError(
                f"{path} can be read or changed by other users (mode "
                f"{stat.S_IMODE(info.st_mode):04o}); the engine will not use it: remove it and "
                "let the engine make a new one, or chmod 600 it if only you ever had it"
            )
        return data


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
