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

A file that cannot be used (damaged, planted, read-only, on a full disk) never stops the
process: every read and write raises :class:`StoreError` with a code (see
:mod:`byoa_skills.store.problems`), :meth:`WalletDatabase.check` says what is wrong, and a
change submitted with ``keep=True`` waits in memory until the disk takes it.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
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
from byoa_skills.store.errors import StoreError, WritePending
from byoa_skills.store.files import FILE_MODE, UnsafePathError, private_folder
from byoa_skills.store.legacy_import import import_json_files, keep_imported_files
from byoa_skills.store.problems import (
    StoreStatus,
    TooNewError,
    advice,
    is_disk_problem,
    problem_code,
)
from byoa_skills.store.schema import MIGRATIONS

log = logging.getLogger("byoa_skills.store")

DATABASE_FILE = "wallet.sqlite3"
#: How long a connection waits for another process's write lock, in seconds.
BUSY_SECONDS = 10.0
#: The most queued changes the writer commits in one transaction.
MAX_BATCH = 512
#: How often the writer tries again the changes the store refused, in seconds (each later
#: write tries them first as well).
RETRY_SECONDS = 5.0

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
        self._queue: queue.Queue[_Queued | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._writer_lock = threading.Lock()
        #: The last failure to use the database, until a use works again.
        self._problem: StoreError | None = None
        #: Changes submitted with ``keep`` that the disk refused, oldest first (the writer's).
        self._unwritten: list[tuple[Change[Any], Future[Any]]] = []

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
            except Exception as error:  # whatever the file holds, the engine goes on
                raise self._failed(error, f"the database {self.path} cannot be used") from None
            self._opened = True
            self._recovered()

    def status(self) -> StoreStatus:
        """The store as last found (no disk access): its problem, and the changes waiting."""
        problem, pending = self._problem, len(self._unwritten)
        if problem is None:
            return StoreStatus(ok=pending == 0, pending_changes=pending)
        return StoreStatus(False, problem.code, str(problem), pending)

    def check(self) -> StoreStatus:
        """:meth:`status`, after trying to open the database when it is not open yet (so a
        file the visitor repaired is seen at once)."""
        if not self._opened:
            with contextlib.suppress(StoreError):
                self.open()
        return self.status()

    def _failed(self, error: Exception, what: str) -> StoreError:
        """A :class:`StoreError` for ``error``, kept as the store's problem (logged once)."""
        code = problem_code(error, self.path.parent)
        failure = StoreError(f"{what}: {error}; {advice(code)}", code)
        previous = self._problem
        if previous is None or (previous.code, str(previous)) != (failure.code, str(failure)):
            log.error("event=store-problem code=%s error=%r", failure.code, str(failure))
        self._problem = failure
        return failure

    def _recovered(self) -> None:
        if self._problem is not None:
            log.info("event=store-recovered was=%s", self._problem.code)
            self._problem = None

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
                raise TooNewError(
                    f"schema version {version} is newer than this engine knows "
                    f"({len(MIGRATIONS)}): update byoa-skills"
                )
            for number in range(version, len(MIGRATIONS)):
                for statement in _statements(MIGRATIONS[number]):
                    connection.execute(statement)
                connection.execute(f"PRAGMA user_version = {number + 1}")
            damaged: list[str] | None = None
            if version == 0 and self.import_from is not None:
                damaged = import_json_files(connection, Path(self.import_from))
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        if damaged is not None and self.import_from is not None:
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
                raise self._failed(error, "the wallet's database cannot be read") from None
            self._local.connection = connection
            self._local.version = None
        return connection

    def read(self, query: Change[T]) -> T:
        """Run ``query`` on this thread's connection; :class:`StoreError` when it fails."""
        try:
            return query(self.reader())
        except sqlite3.Error as error:
            raise self._failed(error, "the wallet's database cannot be read") from None

    def changed(self) -> bool:
        """Whether anything was committed (by any connection) since this thread last asked;
        True on the first call."""
        connection = self.reader()
        try:
            version = connection.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error as error:
            raise self._failed(error, "the wallet's database cannot be read") from None
        if version == self._local.version:
            return False
        self._local.version = version
        return True

    # -- writes -----------------------------------------------------------------------------

    def submit(self, change: Change[T], *, keep: bool = False) -> Future[T]:
        """Queue ``change`` for the writer thread; its future has the change's return value
        once committed (or its exception; the other changes of the batch still commit).

        When the store cannot take it (damaged, read-only, full) the future fails with
        :class:`StoreError`; with ``keep`` it fails with :class:`WritePending` instead and the
        change is kept: the writer tries it again before every later batch and every
        :data:`RETRY_SECONDS` until it commits. Kept changes are lost if the process ends
        before then."""
        future: Future[T] = Future()
        self._start_writer()
        self._queue.put(_Queued(change, future, keep))
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
        if self._unwritten:
            log.error(
                "event=store-changes-lost count=%d (the disk never took them)", len(self._unwritten)
            )
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
        stop = False
        while not stop:
            try:
                first = self._queue.get(timeout=RETRY_SECONDS if self._unwritten else None)
            except queue.Empty:
                first = _RETRY  # only the kept changes, tried again
            if first is None:
                break
            batch = [] if first is _RETRY else [first]
            while len(batch) < MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            # the kept changes go first, in the order they were made
            changes = [*self._unwritten, *((item.change, item.future) for item in batch)]
            try:
                if connection is None:
                    self.open()
                    connection = self._connect()
                while_busy(functools.partial(_commit, connection, changes))
            except Exception as error:  # the disk or the file failed: nothing was written
                # a StoreError is open()'s, which said why already
                failure = (
                    error if isinstance(error, StoreError) else self._failed(error, "not written")
                )
                self._refuse(batch, failure)
                if connection is not None:
                    with contextlib.suppress(sqlite3.Error):
                        connection.close()
                    connection = None
            else:
                self._unwritten = []
                self._recovered()
        if connection is not None:
            connection.close()

    def _refuse(self, batch: list[_Queued], failure: StoreError) -> None:
        """Fail the futures of a batch the store did not take; keep the changes that ask."""
        for item in batch:
            if item.future.done():
                continue
            if item.keep:
                written: Future[Any] = Future()
                self._unwritten.append((item.change, written))
                message = f"in force now, {failure}"
                item.future.set_exception(WritePending(message, failure.code, written))
            else:
                item.future.set_exception(StoreError(str(failure), failure.code))


@dataclasses.dataclass(frozen=True)
class _Queued:
    change: Change[Any]
    future: Future[Any]
    keep: bool = False


#: What the writer makes of a wait that timed out: try the kept changes again.
_RETRY = _Queued(lambda connection: None, Future())


def _commit(connection: sqlite3.Connection, batch: list[tuple[Change[Any], Future[Any]]]) -> None:
    """Run a batch of changes in one transaction; a change that fails is rolled back alone
    (a savepoint each) and its future gets the error. A failure of the disk or the file
    fails the whole batch (raised), whichever change met it."""
    results: list[tuple[Future[Any], Any, BaseException | None]] = []
    connection.execute("BEGIN IMMEDIATE")
    try:
        for change, future in batch:
            connection.execute("SAVEPOINT change")
            try:
                value = change(connection)
            except Exception as error:  # one bad change must not lose the others
                if is_disk_problem(error):
                    raise
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
