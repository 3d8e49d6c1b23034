"""The ``grants`` table, by column name: a kept grant is a :class:`GrantRow` (what the
visitor gave, and its running :class:`GrantRecord`), and the functions here are the only SQL
that writes or reads it. Each takes a connection, as the database's writer and readers give
one (:meth:`~byoa_skills.store.database.WalletDatabase.submit`, ``read``). What a grant
means is the wallet shim's business; here it is columns."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from byoa_skills.store.clock import rfc3339
from byoa_skills.store.sites import ensure_site


@dataclass(frozen=True)
class GrantRecord:
    """A grant's running record: calls admitted, running now and at most, spend reserved
    and settled, and when the calls of the last minute were admitted (milliseconds)."""

    calls: int = 0
    in_flight: int = 0
    reserved: Decimal = Decimal(0)
    spent: Decimal = Decimal(0)
    call_times: tuple[int, ...] = ()
    peak_in_flight: int = 0


@dataclass(frozen=True)
class GrantRow:
    """One kept grant: whose it is, the manifest and the grant as the visitor gave them, the
    limits it was answered with, its currency and lifetime (milliseconds since the epoch),
    and its running record."""

    id: str
    origin: str
    manifest: dict[str, Any]
    given: dict[str, Any]
    limits: dict[str, Any]
    currency: str
    created_ms: int
    expires_ms: int
    record: GrantRecord = field(default_factory=GrantRecord)


@dataclass(frozen=True)
class KeptGrants:
    """What the table holds: the rows that can be read, and the ids of those that cannot
    (their JSON or their spend is damaged)."""

    rows: list[GrantRow]
    unreadable: list[str]


_GIVEN = ("id", "origin", "manifest", "given", "limits", "currency", "created_ms", "expires_ms")
_RECORD = ("calls", "in_flight", "reserved", "spent", "call_times", "peak_in_flight")
_JSON = ("manifest", "given", "limits")


def insert_grant(db: sqlite3.Connection, row: GrantRow) -> None:
    """Keep a new grant (its record starts empty), replacing one with the same id; the site
    gets its row, active since the grant was made, when it has none."""
    ensure_site(db, row.origin, rfc3339(row.created_ms))
    values = {name: getattr(row, name) for name in _GIVEN}
    values.update((name, json.dumps(values[name])) for name in _JSON)
    db.execute(
        f"INSERT OR REPLACE INTO grants ({', '.join(_GIVEN)}) "
        f"VALUES ({', '.join(':' + name for name in _GIVEN)})",
        values,
    )


def update_given(
    db: sqlite3.Connection,
    grant_id: str,
    given: dict[str, Any],
    limits: dict[str, Any],
    expires_ms: int,
) -> None:
    """Write the grant as the visitor changed it (what was given, the limits it now answers
    with, its expiry) over the one kept; its record stays."""
    db.execute(
        "UPDATE grants SET given = ?, limits = ?, expires_ms = ? WHERE id = ?",
        (json.dumps(given), json.dumps(limits), expires_ms, grant_id),
    )


def update_record(db: sqlite3.Connection, grant_id: str, record: GrantRecord) -> None:
    """Write a grant's running record over the one kept."""
    values = asdict(record)
    values.update(
        reserved=format(record.reserved, "f"),
        spent=format(record.spent, "f"),
        call_times=json.dumps(list(record.call_times)),
        id=grant_id,
    )
    db.execute(
        f"UPDATE grants SET {', '.join(f'{name} = :{name}' for name in _RECORD)} WHERE id = :id",
        values,
    )


def delete_grants(db: sqlite3.Connection, grant_ids: Iterable[str]) -> None:
    """Forget the grants with these ids (an id not kept is no error)."""
    db.executemany("DELETE FROM grants WHERE id = ?", [(grant_id,) for grant_id in grant_ids])


def read_grants(db: sqlite3.Connection) -> KeptGrants:
    """Every kept grant, in no particular order."""
    cursor = db.execute(f"SELECT {', '.join(_GIVEN + _RECORD)} FROM grants")
    names = [column[0] for column in cursor.description]
    kept = KeptGrants([], [])
    for values in cursor.fetchall():
        columns = dict(zip(names, values, strict=True))
        try:
            kept.rows.append(_row(columns))
        except (ValueError, TypeError, InvalidOperation):
            kept.unreadable.append(columns["id"])
    return kept


def _row(columns: dict[str, Any]) -> GrantRow:
    times = json.loads(columns["call_times"])
    record = GrantRecord(
        calls=columns["calls"],
        in_flight=columns["in_flight"],
        reserved=Decimal(columns["reserved"]),
        spent=Decimal(columns["spent"]),
        call_times=tuple(t for t in times if isinstance(t, int)) if isinstance(times, list) else (),
        peak_in_flight=columns["peak_in_flight"],
    )
    decoded = {name: json.loads(columns[name]) for name in _JSON}
    given = {name: columns[name] for name in _GIVEN if name not in _JSON}
    return GrantRow(**given, **decoded, record=record)
