"""What the wallet keeps between direct-link connections: the pairing token of each site the
visitor let it decide for on its own, and the session codes it saw in the last 10 minutes
(as SHA-256 digests). Both are tables of the wallet's database, shared between processes."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from concurrent.futures import Future
from typing import Any

from byoa_skills.store.clock import now_ms, rfc3339
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import ensure_site

#: A session code seen this recently is ignored (the site guide's 10 minutes).
CODE_MEMORY_SECONDS = 600


class PairingStore:
    """The direct link's pairings, by origin (a token to come back to a site with)."""

    def __init__(self, database: WalletDatabase | None = None) -> None:
        self.database = database if database is not None else WalletDatabase.default()

    def all(self) -> dict[str, dict[str, Any]]:
        """Every kept pairing, by origin."""
        rows = self.database.read(
            lambda db: db.execute("SELECT origin, record FROM link_pairings").fetchall()
        )
        return {origin: json.loads(record) for origin, record in rows}

    def keep(self, origin: str, record: dict[str, Any]) -> None:
        """Keep (or replace) the pairing of ``origin``: link and token. Queued."""
        text = json.dumps(record)
        now = rfc3339(now_ms())

        def change(db: sqlite3.Connection) -> None:
            ensure_site(db, origin, now)
            db.execute(
                "INSERT INTO link_pairings (origin, record) VALUES (?, ?) "
                "ON CONFLICT (origin) DO UPDATE SET record = excluded.record",
                (origin, text),
            )

        self.database.submit(change)

    def drop(self, origin: str) -> None:
        """Forget the pairing of ``origin``: a new link is needed. Queued."""
        self.database.submit(
            lambda db: db.execute("DELETE FROM link_pairings WHERE origin = ?", (origin,))
        )


class RecentCodes:
    """Session codes seen in the last ``memory`` seconds (10 minutes), as SHA-256 digests."""

    def __init__(
        self, database: WalletDatabase | None = None, memory: float = CODE_MEMORY_SECONDS
    ) -> None:
        self.database = database if database is not None else WalletDatabase.default()
        self.memory = memory

    def seen(self, code: str) -> bool:
        """Whether ``code`` was seen in the last 10 minutes (remembers nothing)."""
        digest, oldest = _digest(code), now_ms() - int(self.memory * 1000)
        row = self.database.read(
            lambda db: db.execute(
                "SELECT 1 FROM recent_codes WHERE digest = ? AND seen_ms > ?", (digest, oldest)
            ).fetchone()
        )
        return row is not None

    def first_sight(self, code: str) -> bool:
        """Remember ``code``; True when it was not seen in the last 10 minutes. Waits for the
        commit: on the event loop, await :meth:`remember` instead."""
        return self.remember(code).result()

    def remember(self, code: str) -> Future[bool]:
        """Queue remembering ``code``; the future is True when it was not seen in the last 10
        minutes. Codes older than that are pruned on the way."""
        digest, now = _digest(code), now_ms()
        oldest = now - int(self.memory * 1000)

        def change(db: sqlite3.Connection) -> bool:
            db.execute("DELETE FROM recent_codes WHERE seen_ms <= ?", (oldest,))
            inserted = db.execute(
                "INSERT INTO recent_codes (digest, seen_ms) VALUES (?, ?) "
                "ON CONFLICT (digest) DO NOTHING",
                (digest, now),
            ).rowcount
            return inserted > 0

        return self.database.submit(change)


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()
