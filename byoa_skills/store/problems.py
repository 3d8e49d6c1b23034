"""What is wrong with the wallet's store, as a stable code and a plain message.

A failure to open, read or write the database is sorted into one of :data:`STORE_CODES`;
``/health`` and the wallet page show the code and the message (which says what to do), and
a site is refused ``site-unreadable`` meanwhile.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from byoa_skills.store.errors import SiteListError
from byoa_skills.store.files import UnsafePathError

#: Every code a store problem has, with what the visitor can do about it.
STORE_CODES: dict[str, str] = {
    "store-unsafe": "the file or its folder could have been planted or changed by someone "
    "else; fix or remove what the message names",
    "store-damaged": "move the file aside (the engine makes a new, empty one) or put back a "
    "copy you kept",
    "store-too-new": "a newer byoa-skills wrote it: update byoa-skills",
    "store-read-only": "the data folder cannot be written: make it writable",
    "store-full": "the disk is full: free some space (changes waiting are written then)",
    "store-unreadable": "see the message",
}

_FULL = {sqlite3.SQLITE_FULL}
_READ_ONLY = {
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_PERM,
}
_DAMAGED = {sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_FORMAT}
#: SQLite's codes that say the disk or the file failed, not the change that was written.
DISK_CODES = frozenset(_FULL | _READ_ONLY | _DAMAGED)


class TooNewError(sqlite3.DatabaseError):
    """The database's schema version is newer than this engine knows."""


def problem_code(error: BaseException, folder: Path) -> str:
    """The code (one of :data:`STORE_CODES`) of a failure to use the database in ``folder``."""
    if isinstance(error, UnsafePathError):
        return "store-unsafe"
    if isinstance(error, TooNewError):
        return "store-too-new"
    if isinstance(error, SiteListError):
        return "store-damaged"
    if isinstance(error, sqlite3.Error):
        code = (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF
        if code in _FULL:
            return "store-full"
        if code in _DAMAGED:
            return "store-damaged"
        if code in _READ_ONLY and not _writable(folder):
            return "store-read-only"
        if code == sqlite3.SQLITE_READONLY:
            return "store-read-only"
        return "store-unreadable"
    if isinstance(error, OSError):
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            return "store-full"
        if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM) or not _writable(folder):
            return "store-read-only"
    return "store-unreadable"


def is_disk_problem(error: BaseException) -> bool:
    """Whether a change that raised ``error`` failed because of the disk or the file (so the
    whole transaction fails), not because of what it wrote."""
    code = (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF
    return isinstance(error, sqlite3.Error) and code in DISK_CODES


def advice(code: str) -> str:
    """What the visitor can do about a problem with this code."""
    return STORE_CODES.get(code, STORE_CODES["store-unreadable"])


@dataclass(frozen=True)
class StoreStatus:
    """The store as the engine last found it: whether it works, and if not why."""

    #: Whether the last use of the database worked and no change waits to be written.
    ok: bool
    #: One of :data:`STORE_CODES` when the last use failed.
    code: str | None = None
    #: What failed and what to do, in one line.
    message: str | None = None
    #: Changes of the visitor (a pause, a block) in force but not yet written.
    pending_changes: int = 0

    def to_json(self) -> dict[str, Any]:
        """``{"ok", "pendingChanges"}``, with ``code`` and ``message`` when something failed."""
        shown: dict[str, Any] = {"ok": self.ok}
        if self.code is not None:
            shown.update(code=self.code, message=self.message)
        shown["pendingChanges"] = self.pending_changes
        return shown


def _writable(folder: Path) -> bool:
    try:
        return os.access(folder, os.W_OK)
    except OSError:
        return False
