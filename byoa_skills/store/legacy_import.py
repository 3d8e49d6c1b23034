"""The import of the JSON files older versions kept, into a database made anew.

``sites.json``, ``pairings.json``, ``recent-codes.json`` and the ``activity/`` log are read
once, in the migration's transaction; once it commits each is renamed ``NAME.imported`` (kept
as a backup, never read again). A file that cannot be read is left where it is, reported in
the log and, for the site list, refused: a damaged ``sites.json`` may hold blocked sites, so
the database is not made until the visitor repairs or removes it (calls are refused
``site-unreadable`` meanwhile, as they were).

An entry no engine could have written (a time that is NaN, Infinity or 1e30, a value JSON
does not allow, nesting deeper than Python reads) is skipped, counted and reported in the
log (``event=import-skipped``); the rest of its file is imported.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sqlite3
from pathlib import Path
from typing import Any

from byoa_skills.store.activity_rows import entry_row, insert_entry
from byoa_skills.store.legacy_formats import SITES_FILE, parse_site_list
from byoa_skills.store.origins import normalize_origin

log = logging.getLogger("byoa_skills.store")

PAIRINGS_FILE = "pairings.json"
RECENT_CODES_FILE = "recent-codes.json"
ACTIVITY_FOLDER = "activity"
ACTIVITY_FILE = "activity.jsonl"
#: What an imported file or folder is renamed to.
IMPORTED_SUFFIX = ".imported"
#: How every activity line older versions wrote begins.
_ENTRY_START = b'{"time":'
#: The latest instant a recent code may carry, in seconds since the epoch (year 9999).
_LAST_SECOND = 253_402_300_799


def import_json_files(db: sqlite3.Connection, folder: Path) -> list[str]:
    """Import what ``folder`` holds into ``db`` (inside the caller's transaction); the names
    of the files that were damaged (left where they are). Raises :class:`SiteListError` for
    a ``sites.json`` that is not a valid site list."""
    counts = {"sites": 0, "pairings": 0, "codes": 0, "activity": 0}
    skipped = {PAIRINGS_FILE: 0, RECENT_CODES_FILE: 0}
    damaged: list[str] = []
    sites_path = folder / SITES_FILE
    with contextlib.suppress(FileNotFoundError):
        sites = parse_site_list(sites_path.read_bytes(), sites_path)
        for origin, record in sites.items():
            db.execute(
                "INSERT INTO sites (origin, state, since, first_seen, last_seen, note) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    origin,
                    record["state"],
                    record["since"],
                    _text(record.get("firstSeen")),
                    _text(record.get("lastSeen")),
                    _text(record.get("note")),
                ),
            )
            counts["sites"] += 1
    pairings = _json_object(folder / PAIRINGS_FILE, damaged)
    for origin, record in pairings.items():
        try:
            key = normalize_origin(origin)
            text = json.dumps(record, allow_nan=False) if isinstance(record, dict) else None
        except (ValueError, TypeError, RecursionError):
            key = text = None
        if key is None or text is None:
            skipped[PAIRINGS_FILE] += 1
            continue
        db.execute(
            "INSERT INTO sites (origin, state, since) VALUES (?, 'active', '') "
            "ON CONFLICT (origin) DO NOTHING",
            (key,),
        )
        db.execute(
            "INSERT OR REPLACE INTO link_pairings (origin, record) VALUES (?, ?)", (key, text)
        )
        counts["pairings"] += 1
    for digest, seen in _json_object(folder / RECENT_CODES_FILE, damaged).items():
        if not _is_instant(seen):
            skipped[RECENT_CODES_FILE] += 1
            continue
        db.execute(
            "INSERT OR REPLACE INTO recent_codes (digest, seen_ms) VALUES (?, ?)",
            (str(digest), int(seen * 1000)),
        )
        counts["codes"] += 1
    counts["activity"] = _import_activity(db, folder / ACTIVITY_FOLDER)
    for name, count in skipped.items():
        if count:
            log.warning("event=import-skipped file=%s entries=%d", name, count)
    if any(counts.values()):
        log.info("event=store-imported %s", " ".join(f"{k}={v}" for k, v in counts.items()))
    return damaged


def _is_instant(seen: Any) -> bool:
    """Whether ``seen`` is a time older versions could have written: seconds since the
    epoch, a finite number from 0 to the year 9999."""
    if not isinstance(seen, (int, float)) or isinstance(seen, bool):
        return False
    return math.isfinite(seen) and 0 <= seen <= _LAST_SECOND


def keep_imported_files(folder: Path, damaged: list[str]) -> None:
    """Rename each imported file (and the activity folder) ``NAME.imported``; the damaged
    ones stay as they are."""
    for name in (SITES_FILE, PAIRINGS_FILE, RECENT_CODES_FILE, ACTIVITY_FOLDER):
        if name in damaged:
            continue
        path = folder / name
        if path.exists() and not (folder / (name + IMPORTED_SUFFIX)).exists():
            with contextlib.suppress(OSError):
                os.replace(path, folder / (name + IMPORTED_SUFFIX))


def _import_activity(db: sqlite3.Connection, folder: Path) -> int:
    """Every whole entry of the old log files, oldest file first; torn lines are skipped."""
    files = sorted(folder.glob(ACTIVITY_FILE + ".*"), key=_rotation, reverse=True)
    files = [path for path in files if path.suffix != ".lock"] + [folder / ACTIVITY_FILE]
    count = skipped = 0
    for path in files:
        try:
            data = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            continue
        for raw in data[: data.rfind(b"\n") + 1].splitlines():
            entry = _parse_line(raw)
            if entry is None or not isinstance(entry.get("time"), str):
                skipped += 1
                continue
            try:  # NaN, Infinity and 1e400 are read by Python's JSON, written by no engine
                row = entry_row(entry, _time_ms(entry["time"]))
            except (ValueError, TypeError, OverflowError, RecursionError):
                skipped += 1
                continue
            insert_entry(db, row)
            count += 1
    if skipped:
        log.warning("event=import-skipped file=%s lines=%d", ACTIVITY_FOLDER, skipped)
    return count


def _rotation(path: Path) -> int:
    suffix = path.name.rsplit(".", 1)[-1]
    return int(suffix) if suffix.isdigit() else 0


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    try:
        entry = json.loads(raw)
    except RecursionError:
        return None
    except ValueError:
        # A line torn by a crash is followed by the next whole entry on the same line; every
        # entry begins with its time, so the last such beginning is that entry.
        start = raw.rfind(_ENTRY_START)
        if start <= 0:
            return None
        try:
            entry = json.loads(raw[start:])
        except (ValueError, RecursionError):
            return None
    return entry if isinstance(entry, dict) else None


def _time_ms(text: str) -> int:
    from datetime import datetime

    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except (ValueError, OverflowError, OSError):
        return 0


def _json_object(path: Path, damaged: list[str]) -> dict[str, Any]:
    """The file's JSON object; {} when it is missing, and when it is damaged (then its name
    goes to ``damaged`` and it is reported)."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (ValueError, OSError, RecursionError) as error:
        data, problem = None, str(error)[:200]
    else:
        problem = "not a JSON object"
    if isinstance(data, dict):
        return data
    damaged.append(path.name)
    log.warning("event=import-damaged file=%s error=%r (left as it is)", path, problem)
    return {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
