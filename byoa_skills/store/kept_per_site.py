"""One JSON document kept per site in a table of its own (``origin``, the document, ``since``):
what the visitor allowed a site (:mod:`~byoa_skills.store.allowed_scopes`) and what they chose
for it (:mod:`~byoa_skills.store.visitor_choices`). Forgetting a site forgets its documents
(the rows go with the site's)."""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import Future
from typing import Any, ClassVar

from byoa_skills.store.clock import now_ms, rfc3339
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import ensure_site


class KeptPerSite:
    """The document kept for each site, by origin (normalised), in :attr:`TABLE`."""

    #: The table, and the column that holds the document (names from the schema, never input).
    TABLE: ClassVar[str]
    COLUMN: ClassVar[str]

    def __init__(self, database: WalletDatabase) -> None:
        self.database = database

    def get(self, origin: str) -> Any:
        """The JSON kept for ``origin``, or None when there is none (or it is not JSON)."""
        query = f"SELECT {self.COLUMN} FROM {self.TABLE} WHERE origin = ?"
        row = self.database.read(lambda db: db.execute(query, (origin,)).fetchone())
        if row is None:
            return None
        try:
            return json.loads(row[0], parse_constant=_no_constant)
        except ValueError:
            return None

    def keep(self, origin: str, document: dict[str, Any]) -> Future[None]:
        """Keep ``document`` for ``origin`` (replacing what was kept). Queued."""
        text = json.dumps(document, allow_nan=False, sort_keys=True)
        now = rfc3339(now_ms())
        upsert = (
            f"INSERT INTO {self.TABLE} (origin, {self.COLUMN}, since) VALUES (?, ?, ?) "
            f"ON CONFLICT (origin) DO UPDATE SET {self.COLUMN} = excluded.{self.COLUMN}, "
            "since = excluded.since"
        )

        def change(db: sqlite3.Connection) -> None:
            ensure_site(db, origin, now)
            db.execute(upsert, (origin, text, now))

        return self.database.submit(change)

    def drop(self, origin: str) -> Future[None]:
        """Forget what is kept for ``origin``. Queued."""
        query = f"DELETE FROM {self.TABLE} WHERE origin = ?"

        def change(db: sqlite3.Connection) -> None:
            db.execute(query, (origin,))

        return self.database.submit(change)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
