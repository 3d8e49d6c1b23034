"""The activity log: one JSON line per grant, release, call and link, never audio or text.

The log is ``activity.jsonl`` in ``activity/`` under the user's data folder, mode 0600. When
a line would take it past ``max_bytes`` it is renamed ``activity.jsonl.1`` (the older ones
move up to ``.2`` … ``.keep``, the oldest is dropped) and a new one is begun.

Each entry is written with one ``os.write`` on a descriptor opened with ``O_APPEND``, so the
lines of several processes writing at once never mix, and a line is in the operating system
(safe from a crash of the process) when ``record`` returns. Only the rotation takes a lock.

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

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from byoa_skills.store import paths
from byoa_skills.store.files import FILE_MODE, locked, private_folder
from byoa_skills.store.sites import normalize_origin

LOG_FOLDER = "activity"
LOG_FILE = "activity.jsonl"
DEFAULT_MAX_BYTES = 1_048_576
DEFAULT_KEEP = 5

#: The kinds of entry the engine writes.
KINDS = ("grant", "release", "call", "link")
#: Keys that could carry audio or text: an entry holding one (at any depth) is refused.
FORBIDDEN_KEYS = frozenset({"input", "audio", "base64", "text", "messages", "output"})
#: How every line ``record`` writes begins.
ENTRY_START = b'{"time":'


class ActivityLog:
    """The activity log in ``folder`` (default ``activity/`` under the user's data folder).

    ``max_bytes`` is the size a file rotates at; ``keep`` (at least 1) the number of old
    files kept. Several processes may write the same log at once.
    """

    def __init__(
        self,
        folder: Path | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        keep: int = DEFAULT_KEEP,
    ) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, not {max_bytes}")
        if keep < 1:
            raise ValueError(f"keep must be at least 1, not {keep}")
        self.folder = folder if folder is not None else paths.data_dir() / LOG_FOLDER
        self.path = self.folder / LOG_FILE
        self.max_bytes = max_bytes
        self.keep = keep
        self._lock_path = self.folder / (LOG_FILE + ".lock")

    def files(self) -> list[Path]:
        """The log's files that exist, oldest first (``.keep`` … ``.1``, then the current)."""
        names = [self._rotated(number) for number in range(self.keep, 0, -1)] + [self.path]
        return [path for path in names if path.exists()]

    def record(self, entry: Mapping[str, Any]) -> None:
        """Append ``entry`` as one line, with ``time`` added when it has none.

        Raises ``ValueError`` when the entry holds a key that could carry audio or text (see
        ``FORBIDDEN_KEYS``) or cannot be written as JSON; then nothing is written.
        """
        if not isinstance(entry, Mapping):
            raise ValueError(f"an activity entry is a mapping, not {type(entry).__name__}")
        _refuse_content(entry)
        line = {"time": entry.get("time") or _now()}
        line.update((key, value) for key, value in entry.items() if key != "time")
        try:
            encoded = (json.dumps(line, separators=(",", ":"), allow_nan=False) + "\n").encode()
        except (TypeError, ValueError) as error:
            raise ValueError(f"the activity entry is not JSON: {error}") from None
        private_folder(self.folder)
        descriptor = self._open()
        try:
            if self._too_full(os.fstat(descriptor).st_size, len(encoded)):
                os.close(descriptor)
                descriptor = -1
                self._rotate_if_full(len(encoded))
                descriptor = self._open()
            _write_all(descriptor, encoded)
        finally:
            if descriptor >= 0:
                os.close(descriptor)

    def read(self, origin: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The entries (of ``origin`` only, when given), oldest first: the newest ``limit`` of
        them when a limit is given.

        Lines that are not whole JSON objects (a line torn by a crash) are skipped. Raises
        ``ValueError`` for an ``origin`` that is not an origin or a negative ``limit``.
        """
        wanted = normalize_origin(origin) if origin is not None else None
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be 0 or more, not {limit}")
        if limit == 0 or not self.folder.exists():
            return []
        found: list[dict[str, Any]] = []
        with locked(self._lock_path):  # no rotation while the files are read
            for path in reversed(self.files()):
                for entry in _entries_newest_first(path):
                    if wanted is None or entry.get("origin") == wanted:
                        found.append(entry)
                        if limit is not None and len(found) == limit:
                            return found[::-1]
        return found[::-1]

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)

    def _too_full(self, size: int, adding: int) -> bool:
        return size > 0 and size + adding > self.max_bytes

    def _rotate_if_full(self, adding: int) -> None:
        with locked(self._lock_path):
            # Another process may have rotated since this one looked: look again.
            try:
                size = os.stat(self.path).st_size
            except FileNotFoundError:
                return
            if not self._too_full(size, adding):
                return
            for number in range(self.keep - 1, 0, -1):
                with contextlib.suppress(FileNotFoundError):
                    os.replace(self._rotated(number), self._rotated(number + 1))
            os.replace(self.path, self._rotated(1))

    def _rotated(self, number: int) -> Path:
        return self.folder / f"{LOG_FILE}.{number}"


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


def _entries_newest_first(path: Path) -> Iterator[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    # Whatever follows the last newline is a line not yet (or never) written whole.
    for raw in reversed(data[: data.rfind(b"\n") + 1].splitlines()):
        entry = _parse_line(raw)
        if entry is not None:
            yield entry


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    try:
        entry = json.loads(raw)
    except ValueError:
        # A line torn by a crash is followed by the next whole entry on the same line; every
        # entry begins with its time, so the last such beginning is that entry.
        start = raw.rfind(ENTRY_START)
        if start <= 0:
            return None
        try:
            entry = json.loads(raw[start:])
        except ValueError:
            return None
    return entry if isinstance(entry, dict) else None


def _write_all(descriptor: int, data: bytes) -> None:
    # A regular file takes the whole line in one write; a short write (a full disk) is
    # finished rather than left torn.
    view = memoryview(data)
    while view:
        written = os.write(descriptor, view)
        view = view[written:]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
