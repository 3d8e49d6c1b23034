"""The wallet's state in one SQLite file: ``wallet.sqlite3`` in the user's data folder.

The file is readable only by the user (0600, in a 0700 folder), in WAL mode with foreign keys
on, and carries its schema version (``PRAGMA user_version``); opening it applies the forward
migrations it lacks and, the first time, imports the JSON files older versions kept.

Two kinds of access, so that the engine's event loop never waits on the disk:

- **Writes** go through one writer thread per process (:meth:`WalletDatabase.submit`): each
  change is a function of a connection, queued; the thread runs every change waiting in one
  transaction and commits once. The caller gets a future and need not wait for it.
- **Reads** use a connection of the calling thread. In WAL mode a read never waits for a write,
  and :meth:`WalletDatabase.changed` tells (from ``PRAGMA data_version``, no disk read) whether
  any connection, of this process or another, committed since the last look, so that callers
  can cache what they read.

Several processes (``serve`` and the CLI) may use the file at once; a writer that finds it
locked waits up to :data:`BUSY_SECONDS`.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import queue
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from byoa_skills.store import paths
from byoa_skills.store.files import FILE_MODE, UnsafePathError, private_folder
from byoa_skills.store.schema import MIGRATIONS

log = logging.getLogger("byoa_skills.store")

DATABASE_FILE = "wallet.sqlite3"
#: How long a connection waits for another process's write lock, in seconds.
BUSY_SECONDS = 10.0
#: The most queued changes the writer commits in one transaction.
MAX_BATCH = 512

T = TypeVar("T")
Change = Callable[[sqlite3.Connection], T]


def is_busy(error: sqlite3.Error) -> bool:
    """Whether ``error`` says another connection holds the file for a moment."""
    message = str(error).lower()
    busy = "locked" in message or "busy" in message
    return isinstance(error, sqlite3.OperationalError) and busy


def while_busy(attempt: Callable[[], T], seconds: float = BUSY_SECONDS) -> T:
    """Run ``attempt`` until it is not refused as busy, for up to ``seconds``.

    SQLite answers "database is locked" at once, without waiting, in a few moments of a WAL
    file's life (another process making it, switching it to WAL, or checkpointing it on its
    last close); every other error, and a lock that outlasts ``seconds``, is raised.
    """
    deadline = time.monotonic() + seconds
    pause = 0.005
    while True:
        try:
            return attempt()
        except sqlite3.Error as error:
            if not is_busy(error) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


class StoreError(Exception):
    """The wallet's database cannot be opened or read (the message says why)."""


def _database_files(path: Path) -> tuple[Path, ...]:
    """The database file and the files SQLite keeps beside it."""
    return (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"))


def check_own_file(path: Path) -> None:
    """Refuse (:class:`UnsafePathError`) a database file that is a symbolic link, not a
    regular file, or owned by another user: someone else planted it. A missing file passes."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePathError(f"{path} is a symbolic link; the wallet will not follow it")
    if not stat.S_ISREG(info.st_mode):
        raise UnsafePathError(f"{path} is not a regular file")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise UnsafePathError(f"{path} belongs to another user (uid {info.st_uid})")


class WalletDatabase:
    """The wallet's database file, its migrations, its writer thread and per-thread readers.

    Nothing touches the disk until the first read or write. ``import_from`` is the folder
    whose JSON files are imported when the database is first made (default: the folder the
    database lies in; None: import nothing).
    """

    def __init__(self, path: Path | None = None, *, import_from: Path | str | None = "beside"):
        self.path = path if path is not None else paths.data_dir() / DATABASE_FILE
        self.import_from = self.path.parent if import_from == "beside" else import_from
        self._opened = False
        self._open_lock = threading.Lock()
        self._local = threading.local()
        self._queue: queue.Queue[tuple[Change[Any], Future[Any]] | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._writer_lock = threading.Lock()

    @classmethod
    def default(cls) -> WalletDatabase:
        """The database in the user's data folder (``$BYOA_SKILLS_HOME/data`` in tests)."""
        return cls()

    # -- opening ----------------------------------------------------------------------------

    def open(self) -> None:
        """Make the file (0600) and apply every migration it lacks, importing the old JSON
        files when it is new; :class:`StoreError` when the file cannot be used."""
        if self._opened:
            return
        with self._open_lock:
            if self._opened:
                return
            try:
                private_folder(self.path.parent)
                for path in _database_files(self.path):
                    check_own_file(path)
                if not self.path.exists():
                    self.path.touch(mode=FILE_MODE)
                check_own_file(self.path)
                self.path.chmod(FILE_MODE)
                while_busy(self._connect_and_migrate)
            except (sqlite3.Error, OSError) as error:
                raise StoreError(f"the database {self.path} cannot be used: {error}") from None
            self._opened = True

    def _connect_and_migrate(self) -> None:
        connection = self._connect_once()
        try:
            self._migrate(connection)
        finally:
            connection.close()

    def _connect(self) -> sqlite3.Connection:
        return while_busy(self._connect_once)

    def _connect_once(self) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False
        )
        try:
            connection.execute("PRAGMA foreign_keys = ON")
            connection.execute("PRAGMA synchronous = NORMAL")  # durable across a process crash
            mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise sqlite3.OperationalError(f"the journal mode stays {mode!r}")
        except BaseException:
            connection.close()
            raise
        return connection

    def _migrate(self, connection: sqlite3.Connection) -> None:
        connection.execute("BEGIN IMMEDIATE")  # one process migrates; others wait, then see it
        try:
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise sqlite3.DatabaseError(
                    f"schema version {version} is newer than this engine knows "
                    f"({len(MIGRATIONS)}): update byoa-skills"
                )
            for number in range(version, len(MIGRATIONS)):
                for statement in _statements(MIGRATIONS[number]):
                    connection.execute(statement)
                connection.execute(f"PRAGMA user_version = {number + 1}")
            damaged: list[str] | None = None
            if version == 0 and self.import_from is not None:
                from byoa_skills.store.legacy_import import import_json_files

                damaged = import_json_files(connection, Path(self.import_from))
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        if damaged is not None and self.import_from is not None:
            from byoa_skills.store.legacy_import import keep_imported_files

            keep_imported_files(Path(self.import_from), damaged)

    # -- reads ------------------------------------------------------------------------------

    def reader(self) -> sqlite3.Connection:
        """This thread's connection for reads (opened, and the database made, on first use);
        :class:`StoreError` when the database cannot be used."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            self.open()
            try:
                connection = self._connect()
            except sqlite3.Error as error:
                raise StoreError(f"the wallet's database cannot be read: {error}") from None
            self._local.connection = connection
            self._local.version = None
        return connection

    def read(self, query: Change[T]) -> T:
        """Run ``query`` on this thread's connection; :class:`StoreError` when it fails."""
        try:
            return query(self.reader())
        except sqlite3.Error as error:
            raise StoreError(f"the wallet's database cannot be read: {error}") from None

    def changed(self) -> bool:
        """Whether anything was committed (by any connection) since this thread last asked;
        True on the first call."""
        connection = self.reader()
        try:
            version = connection.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error as error:
            raise StoreError(f"the wallet's database cannot be read: {error}") from None
        if version == self._local.version:
            return False
        self._local.version = version
        return True

    # -- writes -----------------------------------------------------------------------------

    def submit(self, change: Change[T]) -> Future[T]:
        """Queue ``change`` for the writer thread; its future has the change's return value
        once committed (or its exception; the other changes of the batch still commit)."""
        future: Future[T] = Future()
        self._start_writer()
        self._queue.put((change, future))
        return future

    def write(self, change: Change[T]) -> T:
        """Run ``change`` through the writer and wait for its commit (for the CLI and tests;
        never on the event loop)."""
        return self.submit(change).result()

    def flush(self, timeout: float | None = None) -> None:
        """Return once every change queued before this call is committed."""
        if self._writer is not None:
            self.submit(lambda connection: None).result(timeout)

    def close(self) -> None:
        """Commit what is queued, stop the writer and close this thread's reader."""
        with self._writer_lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            self._queue.put(None)
            writer.join()
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    def _start_writer(self) -> None:
        if self._writer is not None:
            return
        with self._writer_lock:
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_forever, name="byoa-store-writer", daemon=True
                )
                self._writer.start()
                atexit.register(self.close)

    def _write_forever(self) -> None:
        connection: sqlite3.Connection | None = None
        while True:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            stop = False
            while len(batch) < MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            try:
                if connection is None:
                    self.open()
                    connection = self._connect()
                while_busy(functools.partial(_commit, connection, batch))
            except (StoreError, sqlite3.Error) as error:
                log.error("event=store-write-failed changes=%d error=%r", len(batch), str(error))
                for _, future in batch:
                    if not future.done():
                        future.set_exception(StoreError(f"not written: {error}"))
                if connection is not None:
                    with contextlib.suppress(sqlite3.Error):
                        connection.close()
                    connection = None
            if stop:
                break
        if connection is not None:
            connection.close()


def _commit(connection: sqlite3.Connection, batch: list[tuple[Change[Any], Future[Any]]]) -> None:
    """Run a batch of changes in one transaction; a change that fails is rolled back alone
    (a savepoint each) and its future gets the error."""
    results: list[tuple[Future[Any], Any, BaseException | None]] = []
    connection.execute("BEGIN IMMEDIATE")
    try:
        for change, future in batch:
            connection.execute("SAVEPOINT change")
            try:
                value = change(connection)
            except Exception as error:  # one bad change must not lose the others
                connection.execute("ROLLBACK TO change")
                connection.execute("RELEASE change")
                results.append((future, None, error))
                continue
            connection.execute("RELEASE change")
            results.append((future, value, None))
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise
    for future, value, error in results:
        if error is not None:
            log.error("event=store-change-failed error=%r", str(error))
            future.set_exception(error)
        else:
            future.set_result(value)


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]
