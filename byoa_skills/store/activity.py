"""The activity log: one entry per grant, release, call and link, never audio or text.

The entries are the ``activity`` table of the wallet's database, indexed by time, site, skill,
decision and outcome, so that the wallet page can show one site's newest entries at once.
:meth:`ActivityLog.record` queues the entry for the database's writer: a call never waits on
the disk. Entries older than ``max_age_days`` and beyond the newest ``max_rows`` are removed.

Fields the callers write (all optional except ``time``, which ``record`` adds):

- ``time``: RFC 3339 UTC with milliseconds, e.g. ``2026-11-30T12:00:00.123Z``
- ``kind``: ``grant``, ``release``, ``call`` or ``link``
- ``origin``: the site's origin, as ``sites.normalize_origin`` writes it
- ``grant``: the grant's id; ``skill``: ``audio.transcribe`` or ``text.generate``
- ``decision``: ``allowed``, ``warn``, ``ask`` or ``blocked``; ``codes``: the reason codes
- ``outcome``: ``ok`` or the refusal code
- ``clipSeconds`` or ``textChars``: what the wallet measured itself
- ``model``: the model that answered; ``latencyMs``: milliseconds; ``cost``: what it cost
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from byoa_skills.store.activity_rows import entry_row, insert_entry
from byoa_skills.store.clock import now_ms, rfc3339
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.files import write_private
from byoa_skills.store.origins import normalize_origin

#: Entries older than this many days are removed (0: kept however old).
DEFAULT_MAX_AGE_DAYS = 365
#: At most this many entries are kept, the newest (0: no bound).
DEFAULT_MAX_ROWS = 1_000_000
#: Old entries are removed after this many new ones.
PRUNE_EVERY = 1000
#: The most entries one query returns.
MAX_QUERY_LIMIT = 10_000

#: The kinds of entry the engine writes.
KINDS = ("grant", "release", "call", "link")
#: Keys that could carry audio or text: an entry holding one (at any depth) is refused.
FORBIDDEN_KEYS = frozenset({"input", "audio", "base64", "text", "messages", "output"})

_DAY_MS = 86_400_000


class ActivityLog:
    """The activity log in the wallet's database (default: the one in the user's data
    folder). Several processes may write and read it at once."""

    def __init__(
        self,
        database: WalletDatabase | None = None,
        *,
        max_age_days: float = DEFAULT_MAX_AGE_DAYS,
        max_rows: int = DEFAULT_MAX_ROWS,
    ) -> None:
        if max_age_days < 0:
            raise ValueError(f"max_age_days must be 0 or more, not {max_age_days}")
        if max_rows < 0:
            raise ValueError(f"max_rows must be 0 or more, not {max_rows}")
        self.database = database if database is not None else WalletDatabase.default()
        self.max_age_days = max_age_days
        self.max_rows = max_rows
        self._since_prune = 0

    def record(self, entry: Mapping[str, Any]) -> Future[int]:
        """Queue ``entry`` for the log, with ``time`` added when it has none; the future has
        the entry's id once committed.

        Raises ``ValueError`` at once when the entry holds a key that could carry audio or
        text (see ``FORBIDDEN_KEYS``) or cannot be written as JSON; then nothing is written.
        """
        if not isinstance(entry, Mapping):
            raise ValueError(f"an activity entry is a mapping, not {type(entry).__name__}")
        _refuse_content(entry)
        at = now_ms()
        line = {"time": entry.get("time") or rfc3339(at)}
        line.update((key, value) for key, value in entry.items() if key != "time")
        try:
            row = entry_row(line, at)
        except (TypeError, ValueError) as error:
            raise ValueError(f"the activity entry is not JSON: {error}") from None
        self._since_prune += 1
        if self._since_prune >= PRUNE_EVERY:
            self._since_prune = 0
            self.prune()
        return self.database.submit(lambda db: insert_entry(db, row))

    def read(self, origin: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The entries (of ``origin`` only, when given), oldest first: the newest ``limit`` of
        them when a limit is given. Raises ``ValueError`` for an ``origin`` that is not an
        origin or a negative ``limit``."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be 0 or more, not {limit}")
        if limit == 0:
            return []
        return self.query(origin=origin, limit=limit)[::-1]

    def query(
        self,
        *,
        origin: str | None = None,
        skill: str | None = None,
        decision: str | None = None,
        code: str | None = None,
        before: int | None = None,
        limit: int | None = 100,
    ) -> list[dict[str, Any]]:
        """The entries that match every filter given, newest first, at most ``limit`` (None:
        all); ``code`` is the outcome (``ok`` or a refusal code); ``before`` an entry id to
        page back from. Each entry carries its ``id``."""
        if limit is not None and not limit >= 0:
            raise ValueError(f"limit must be 0 or more, not {limit}")
        where, values = [], []
        for column, value in (
            ("origin", normalize_origin(origin) if origin is not None else None),
            ("skill", skill),
            ("decision", decision),
            ("outcome", code),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                values.append(value)
        if before is not None:
            where.append("id < ?")
            values.append(before)
        sql = "SELECT id, entry FROM activity"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            values.append(limit)
        rows = self.database.read(lambda db: db.execute(sql, values).fetchall())
        return [{**json.loads(entry), "id": entry_id} for entry_id, entry in rows]

    def export(self, path: Path) -> int:
        """Write every entry, oldest first, as JSON lines to ``path`` (mode 0600, whole or not
        at all); how many."""
        lines = [json.dumps(entry, separators=(",", ":")) + "\n" for entry in self.entries()]
        write_private(path, "".join(lines).encode())
        return len(lines)

    def entries(self) -> Iterator[dict[str, Any]]:
        """Every entry, oldest first, without its id."""
        rows = self.database.read(
            lambda db: db.execute("SELECT entry FROM activity ORDER BY id").fetchall()
        )
        for (entry,) in rows:
            yield json.loads(entry)

    def prune(self) -> Future[int]:
        """Queue the removal of entries past the age and size bounds; the future has how many
        were removed."""
        max_age_ms = int(self.max_age_days * _DAY_MS)
        max_rows = self.max_rows

        def change(db: sqlite3.Connection) -> int:
            removed = 0
            if max_age_ms:
                removed += db.execute(
                    "DELETE FROM activity WHERE time_ms < ?", (now_ms() - max_age_ms,)
                ).rowcount
            if max_rows:
                removed += db.execute(
                    "DELETE FROM activity WHERE id <= (SELECT max(id) FROM activity) - ?",
                    (max_rows,),
                ).rowcount
            return removed

        return self.database.submit(change)


def _refuse_content(value: Any, where: str = "") -> None:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if str(key).lower() in FORBIDDEN_KEYS:
                raise ValueError(
                    f"the activity log never holds audio or text: refused key {where}{key!r}"
                )
            _refuse_content(inner, f"{where}{key}.")
    elif isinstance(value, (list, tuple)):
        for inner in value:
            _refuse_content(inner, where)
