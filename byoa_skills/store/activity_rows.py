"""One activity entry as a row of the ``activity`` table: its indexed columns and its JSON.
Imports nothing of the store, so the log and the legacy import write rows the same way."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

_INDEXED = ("kind", "origin", "skill", "decision", "outcome")


def insert_entry(db: sqlite3.Connection, row: tuple[Any, ...]) -> int:
    """Insert one entry row ``(time_ms, kind, origin, skill, decision, outcome, json)``;
    its id."""
    cursor = db.execute(
        "INSERT INTO activity (time_ms, kind, origin, skill, decision, outcome, entry) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        row,
    )
    return int(cursor.lastrowid or 0)


def entry_row(entry: Mapping[str, Any], time_ms: int) -> tuple[Any, ...]:
    """The row :func:`insert_entry` takes for an entry that already has its ``time``."""
    encoded = json.dumps(dict(entry), separators=(",", ":"), allow_nan=False)
    return (time_ms, *(_column(entry, key) for key in _INDEXED), encoded)


def _column(entry: Mapping[str, Any], key: str) -> str | None:
    value = entry.get(key)
    return value if isinstance(value, str) else None
