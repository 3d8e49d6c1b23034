"""The visitor's site list: which origins are paused or blocked, whether the wallet decides
for each on its own, and when each was seen.

An origin the list does not hold is ``active``. The list is the ``sites`` table of the
wallet's database (:mod:`byoa_skills.store.database`); ``serve`` and the CLI may change it at
once, and the engine sees a change at its next call. In ``serve`` (``keep_unwritten``) a
pause, block or resume the disk refuses is in force at once all the same, and written when
the disk takes it. ``parse_site_list`` reads the JSON file older versions kept
(``sites.json``), for the import.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.errors import SiteChangePending, SiteListError, StoreError, WritePending
from byoa_skills.store.origins import normalize_origin

ACTIVE, PAUSED, BLOCKED = "active", "paused", "blocked"
#: Every state a site can be in; ``active`` is the state of an origin the list does not hold.
STATES = (ACTIVE, PAUSED, BLOCKED)


@dataclass(frozen=True)
class _Held:
    """A state change in force in this process and not yet written."""

    state: str
    since: str
    note: str | None


@dataclass(frozen=True)
class SiteEntry:
    """One origin the list holds: its state, since when (RFC 3339 UTC), and when it was seen."""

    origin: str
    state: str
    since: str
    first_seen: str | None = None
    last_seen: str | None = None
    note: str | None = None
    #: Whether the visitor lets the wallet decide for this site on its own.
    decide_on_my_own: bool = False

    def to_json(self) -> dict[str, Any]:
        """The entry as the file and ``sites list --json`` write it (camelCase keys)."""
        return {
            "origin": self.origin,
            "state": self.state,
            "since": self.since,
            "firstSeen": self.first_seen,
            "lastSeen": self.last_seen,
            "note": self.note,
            "decideOnMyOwn": self.decide_on_my_own,
        }


class SiteStore:
    """The site list, in the wallet's database (default: the one in the user's data folder).

    Every method that takes an origin normalises it first (see ``normalize_origin``) and
    raises ``ValueError`` for one that is not an origin. The methods that change the list
    return whether anything changed, committed; :meth:`seen` only queues its change. A
    database that cannot be read raises :class:`SiteListError` (callers fail closed).
    """

    def __init__(
        self, database: WalletDatabase | None = None, *, keep_unwritten: bool = False
    ) -> None:
        """With ``keep_unwritten`` (the engine's), a pause, block or resume the store refuses
        is in force in this process at once and kept to be written (see :meth:`pause`)."""
        self.database = database if database is not None else WalletDatabase.default()
        self.keep_unwritten = keep_unwritten
        self._local = threading.local()
        self._held: dict[str, _Held] = {}
        self._held_lock = threading.Lock()

    def state(self, origin: str) -> str:
        """The origin's state: ``active``, ``paused`` or ``blocked`` (``active`` when unknown).

        A pause or block not yet written is in force (it needs no read). Otherwise answered
        from a cache that is dropped whenever the database changed, so asking on every call
        costs one ``PRAGMA data_version`` while nothing changes."""
        key = normalize_origin(origin)
        held = self._held.get(key)
        if held is not None and held.state != ACTIVE:
            return held.state
        cache = self._cache()  # a store that cannot be read serves no site, resumed or not
        if held is not None:
            return held.state
        state = cache.get(key)
        if state is None:
            row = self._read(
                lambda db: db.execute("SELECT state FROM sites WHERE origin = ?", (key,)).fetchone()
            )
            state = cache[key] = row[0] if row else ACTIVE
        return state

    def list(self) -> list[SiteEntry]:
        """Every origin the list holds, sorted by origin (with the states in force)."""
        rows = self._read(lambda db: db.execute(f"{_SELECT} ORDER BY origin").fetchall())
        entries = {row[0]: _entry(row) for row in rows}
        for origin, held in self._held.copy().items():
            entries[origin] = _with_held(entries.get(origin), origin, held)
        return [entries[origin] for origin in sorted(entries)]

    def get(self, origin: str) -> SiteEntry | None:
        """The origin's entry, or ``None`` when the list does not hold it."""
        key = normalize_origin(origin)
        row = self._read(lambda db: db.execute(f"{_SELECT} WHERE origin = ?", (key,)).fetchone())
        entry = _entry(row) if row else None
        held = self._held.get(key)
        return entry if held is None else _with_held(entry, key, held)

    def unwritten(self) -> dict[str, str]:
        """The state changes in force but not yet written, by origin."""
        return {origin: held.state for origin, held in self._held.copy().items()}

    def pause(self, origin: str, note: str | None = None) -> bool:
        """Pause the origin: its grants stay, but it gets no answer until resumed.

        With ``keep_unwritten``, when the store refuses the change (a full or read-only disk,
        a damaged file) it is in force in this process all the same, kept and written once
        the store takes it, and :class:`SiteChangePending` says so; so are :meth:`block` and
        :meth:`resume`."""
        return self._set_state(origin, PAUSED, note)

    def resume(self, origin: str) -> bool:
        """Make a paused or blocked origin active again (False when it already was)."""
        return self._set_state(origin, ACTIVE, None)

    def block(self, origin: str, note: str | None = None) -> bool:
        """Block the origin: its requests and links are refused until resumed or forgotten."""
        return self._set_state(origin, BLOCKED, note)

    def forget(self, origin: str) -> bool:
        """Remove the origin from the list (it is ``active`` again), with its kept grants and
        its pairing; False when it was not there."""
        key = normalize_origin(origin)
        forgotten = self._write(
            lambda db: db.execute("DELETE FROM sites WHERE origin = ?", (key,)).rowcount > 0
        )
        with self._held_lock:  # a change kept before was written first (kept ones go first)
            held = self._held.pop(key, None)
        return forgotten or held is not None

    def seen(self, origin: str) -> Future[None]:
        """Record that the origin asked for a grant now (first and last seen), keeping its
        state. Queued: the event loop does not wait for the disk."""
        key = normalize_origin(origin)
        now = _now()
        return self.database.submit(lambda db: ensure_site(db, key, now, seen=True))

    def set_decide_on_my_own(self, origin: str, on: bool) -> bool:
        """Turn "decide on my own" on or off for the origin; whether it changed."""
        key = normalize_origin(origin)
        now = _now()

        def change(db: sqlite3.Connection) -> bool:
            ensure_site(db, key, now)
            return (
                db.execute(
                    "UPDATE sites SET decide_on_my_own = ? "
                    "WHERE origin = ? AND decide_on_my_own != ?",
                    (int(on), key, int(on)),
                ).rowcount
                > 0
            )

        return self._write(change)

    def _set_state(self, origin: str, state: str, note: str | None) -> bool:
        key = normalize_origin(origin)
        now = _now()
        if not self.keep_unwritten:
            return self._write(self._state_change(key, state, note, now))
        try:
            before: str | None = self.state(key)
        except SiteListError:
            before = None
        held = _Held(state, now, note)
        with self._held_lock:
            self._held[key] = held  # in force from now on, written or not
        try:
            future = self.database.submit(self._state_change(key, state, note, now), keep=True)
            changed = bool(future.result())
        except WritePending as pending:
            pending.written.add_done_callback(lambda _: self._settle(key, held))
            raise SiteChangePending(str(pending), pending.code, before != state) from None
        except Exception as error:  # refused for what it is: not kept, not in force
            self._settle(key, held)
            if isinstance(error, StoreError):
                raise SiteListError(str(error), error.code) from None
            raise
        self._settle(key, held)
        return changed

    def _settle(self, key: str, held: _Held) -> None:
        """The change ``held`` is written (or refused): the database says the state again,
        unless a later change is held."""
        with self._held_lock:
            if self._held.get(key) is held:
                del self._held[key]

    @staticmethod
    def _state_change(
        key: str, state: str, note: str | None, now: str
    ) -> Callable[[sqlite3.Connection], bool]:

        def change(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT state, note FROM sites WHERE origin = ?", (key,)).fetchone()
            current, old_note = (row[0], row[1]) if row else (ACTIVE, None)
            if current == state and (note is None or (row is not None and old_note == note)):
                return False
            ensure_site(db, key, now)
            if current != state:
                db.execute(
                    "UPDATE sites SET state = ?, since = ? WHERE origin = ?", (state, now, key)
                )
            if note is not None:
                db.execute("UPDATE sites SET note = ? WHERE origin = ?", (note, key))
            return True

        return change

    def _cache(self) -> dict[str, str]:
        cache: dict[str, str] | None = getattr(self._local, "states", None)
        try:
            changed = self.database.changed()
        except StoreError as error:
            raise SiteListError(str(error), error.code) from None
        if cache is None or changed:
            cache = self._local.states = {}
        return cache

    def _read(self, query: Callable[[sqlite3.Connection], Any]) -> Any:
        try:
            return self.database.read(query)
        except StoreError as error:
            raise SiteListError(str(error), error.code) from None

    def _write(self, change: Callable[[sqlite3.Connection], bool]) -> bool:
        try:
            return bool(self.database.write(change))
        except StoreError as error:
            raise SiteListError(str(error), error.code) from None
        except sqlite3.Error as error:
            raise SiteListError(str(error)) from None


_SELECT = "SELECT origin, state, since, first_seen, last_seen, note, decide_on_my_own FROM sites"


def ensure_site(db: sqlite3.Connection, origin: str, now: str, *, seen: bool = False) -> None:
    """Make the origin's row (active, since now) when missing; with ``seen``, record that it
    was seen now. ``origin`` must be normalised."""
    db.execute(
        "INSERT INTO sites (origin, state, since) VALUES (?, 'active', ?) "
        "ON CONFLICT (origin) DO NOTHING",
        (origin, now),
    )
    if seen:
        db.execute(
            "UPDATE sites SET first_seen = coalesce(first_seen, ?), last_seen = ? WHERE origin = ?",
            (now, now, origin),
        )


def _entry(row: tuple[Any, ...]) -> SiteEntry:
    origin, state, since, first_seen, last_seen, note, decide = row
    return SiteEntry(origin, state, since, first_seen, last_seen, note, bool(decide))


def _with_held(entry: SiteEntry | None, origin: str, held: _Held) -> SiteEntry:
    """The entry with the state change held in memory in force."""
    if entry is None:
        return SiteEntry(origin, held.state, held.since, note=held.note)
    since = entry.since if entry.state == held.state else held.since
    note = held.note if held.note is not None else entry.note
    return replace(entry, state=held.state, since=since, note=note)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
