"""Where the purpose judge runs, as the visitor set it: the wallet's default (one JSON row of
``wallet_settings``: on or off, the model that judges, what a mismatch gives) and each site's
own switch (``judge_sites``: on or off; no row: the default), and what a paid judge spent
today (one JSON row of ``wallet_settings``, ``{"day", "usd"}``: the day's spend, a new day
starting from 0). Read once, kept in memory, and written through the database's writer;
forgetting a site forgets its switch."""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import Future
from decimal import Decimal, InvalidOperation
from typing import Any

from byoa_skills.store.clock import now_ms, rfc3339
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import ensure_site

DEFAULT_KEY = "purpose-judge"
SPENT_KEY = "purpose-judge-spent"


class JudgeSettingsStore:
    """The judge's default and the sites' switches, cached after the first read."""

    def __init__(self, database: WalletDatabase) -> None:
        self.database = database
        self._default: dict[str, Any] | None = None
        self._sites: dict[str, str] | None = None
        self._spent: tuple[str, Decimal] | None = None

    def default(self) -> dict[str, Any]:
        """The default as kept (``{}`` when the visitor never set it, or it is not JSON)."""
        if self._default is None:
            row = self.database.read(
                lambda db: db.execute(
                    "SELECT value FROM wallet_settings WHERE name = ?", (DEFAULT_KEY,)
                ).fetchone()
            )
            try:
                value = json.loads(row[0]) if row else {}
            except ValueError:
                value = {}
            self._default = value if isinstance(value, dict) else {}
        return dict(self._default)

    def set_default(self, value: dict[str, Any]) -> Future[None]:
        """Keep ``value`` as the default (in force at once). Queued."""
        self._default = dict(value)
        text = json.dumps(value, sort_keys=True, allow_nan=False)

        def change(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO wallet_settings (name, value) VALUES (?, ?) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (DEFAULT_KEY, text),
            )

        return self.database.submit(change)

    def spent(self, day: str) -> Decimal:
        """What the paid judge spent on ``day`` (``YYYY-MM-DD``, UTC), in USD."""
        if self._spent is None:
            self._spent = self._read_spent()
        kept_day, usd = self._spent
        return usd if kept_day == day else Decimal(0)

    def add_spent(self, day: str, cost: Decimal) -> None:
        """Count ``cost`` against ``day`` (in force at once; written through the queue)."""
        usd = self.spent(day) + cost
        self._spent = (day, usd)
        text = json.dumps({"day": day, "usd": format(usd, "f")}, sort_keys=True)

        def change(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO wallet_settings (name, value) VALUES (?, ?) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (SPENT_KEY, text),
            )

        self.database.submit(change)

    def _read_spent(self) -> tuple[str, Decimal]:
        row = self.database.read(
            lambda db: db.execute(
                "SELECT value FROM wallet_settings WHERE name = ?", (SPENT_KEY,)
            ).fetchone()
        )
        try:
            value = json.loads(row[0]) if row else {}
            return str(value["day"]), Decimal(str(value["usd"]))
        except (ValueError, KeyError, TypeError, InvalidOperation):
            return "", Decimal(0)

    def sites(self) -> dict[str, str]:
        """Each site's own switch (``on`` or ``off``), by origin."""
        if self._sites is None:
            rows = self.database.read(
                lambda db: db.execute("SELECT origin, setting FROM judge_sites").fetchall()
            )
            self._sites = {str(origin): str(setting) for origin, setting in rows}
        return dict(self._sites)

    def site(self, origin: str) -> str | None:
        """``on``, ``off``, or None: the site follows the default."""
        return self.sites().get(origin)

    def set_site(self, origin: str, setting: str | None) -> Future[None]:
        """Set ``origin``'s switch (None: back to the default), in force at once. Queued."""
        if setting not in ("on", "off", None):
            raise ValueError("the switch is on, off or the default")
        sites = self.sites()
        if setting is None:
            sites.pop(origin, None)
        else:
            sites[origin] = setting
        self._sites = sites
        now = rfc3339(now_ms())

        def change(db: sqlite3.Connection) -> None:
            if setting is None:
                db.execute("DELETE FROM judge_sites WHERE origin = ?", (origin,))
                return
            ensure_site(db, origin, now)
            db.execute(
                "INSERT INTO judge_sites (origin, setting, since) VALUES (?, ?, ?) "
                "ON CONFLICT (origin) DO UPDATE SET setting = excluded.setting, "
                "since = excluded.since",
                (origin, setting, now),
            )

        return self.database.submit(change)

    def forget_site(self, origin: str) -> None:
        """Drop the cached switch of a site that was forgotten (its row went with it)."""
        if self._sites is not None:
            self._sites.pop(origin, None)
