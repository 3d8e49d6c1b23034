"""What the visitor allowed each site that the wallet decides for on its own: the scope of
the manifests allowed with "decide on my own", at its widest (see
:mod:`byoa_skills.wallet_shim.scope`), kept as JSON in the ``allowed_scopes`` table.

Forgetting a site forgets its scope (the row goes with the site's).
"""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import Future
from typing import Any

from byoa_skills.store.clock import now_ms, rfc3339
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import ensure_site


class AllowedScopes:
    """The kept scope of each site, by origin (normalised)."""

    def __init__(self, database: WalletDatabase) -> None:
        self.database = database

    def get(self, origin: str) -> Any:
        """The JSON kept for ``origin``, or None when there is none (or it is not JSON)."""
        row = self.database.read(
            lambda db: db.execute(
                "SELECT scope FROM allowed_scopes WHERE origin = ?", (origin,)
            ).fetchone()
        )
        if row is None:
            return None
        try:
            return json.loads(row[0], parse_constant=_no_constant)
        except ValueError:
            return None

    def keep(self, origin: str, scope: dict[str, Any]) -> Future[None]:
        """Keep ``scope`` as what ``origin`` was allowed (replacing what was kept). Queued."""
        text = json.dumps(scope, allow_nan=False, sort_keys=True)
        now = rfc3339(now_ms())

        def change(db: sqlite3.Connection) -> None:
            ensure_site(db, origin, now)
            db.execute(
                "INSERT INTO allowed_scopes (origin, scope, since) VALUES (?, ?, ?) "
                "ON CONFLICT (origin) DO UPDATE SET scope = excluded.scope, since = excluded.since",
                (origin, text, now),
            )

        return self.database.submit(change)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
