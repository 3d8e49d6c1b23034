"""The visitor's site list: which origins are paused or blocked, and when each was seen.

An origin the list does not hold is ``active``. The list is one JSON file (``sites.json`` in
the user's data folder), mode 0600, replaced atomically on every change. Two processes (a
``serve`` and a CLI) may change it at once: each change takes an advisory lock and re-reads
the file before writing, so no change is lost. Reads are cached by the file's identity,
size and modification time, so reading on every call costs one ``stat``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from byoa_skills.store import paths
from byoa_skills.store.files import locked, write_private

SITES_FILE = "sites.json"
FORMAT_VERSION = 1

ACTIVE, PAUSED, BLOCKED = "active", "paused", "blocked"
#: Every state a site can be in; ``active`` is the state of an origin the list does not hold.
STATES = (ACTIVE, PAUSED, BLOCKED)

SCHEMES = {"http": 80, "https": 443}
_ORIGIN = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<host>\[[^\]]*\]|[^:]*)(?::(?P<port>.*))?"
)
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


class SiteListError(Exception):
    """The site list's file exists but cannot be read as a site list."""


@dataclass(frozen=True)
class SiteEntry:
    """One origin the list holds: its state, since when (RFC 3339 UTC), and when it was seen."""

    origin: str
    state: str
    since: str
    first_seen: str | None = None
    last_seen: str | None = None
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The entry as the file and ``sites list --json`` write it (camelCase keys)."""
        return {
            "origin": self.origin,
            "state": self.state,
            "since": self.since,
            "firstSeen": self.first_seen,
            "lastSeen": self.last_seen,
            "note": self.note,
        }


def normalize_origin(origin: str) -> str:
    """``origin`` as a browser writes it: ``scheme://host[:port]`` in lower case, without the
    scheme's default port. Raises ``ValueError`` with a plain message for anything else.

    Only ``http`` and ``https`` are origins here; the host is a DNS name in ASCII (punycode
    for international names), an IPv4 address, or an IPv6 address in brackets.
    """
    if not isinstance(origin, str):
        raise ValueError(f"an origin is a string, not {type(origin).__name__}")
    text = origin.strip().lower()
    example = "an origin looks like https://game.example.org or http://localhost:8080"
    if "://" not in text:
        raise ValueError(f"not an origin: {origin!r} ({example})")
    scheme, rest = text.split("://", 1)
    if scheme not in SCHEMES:
        raise ValueError(f"not an origin: {origin!r} (the scheme must be http or https)")
    if any(mark in rest for mark in "/?#"):
        cut = min(rest.find(mark) for mark in "/?#" if mark in rest)
        raise ValueError(
            f"not an origin: {origin!r} (an origin has no path, query or fragment: "
            f"did you mean {scheme}://{rest[:cut]}?)"
        )
    if "@" in rest:
        raise ValueError(f"not an origin: {origin!r} (an origin has no user name or password)")
    match = _ORIGIN.fullmatch(text)
    if match is None:
        raise ValueError(f"not an origin: {origin!r} ({example})")
    host = _check_host(match["host"], origin)
    port = match["port"]
    if port is None:
        return f"{scheme}://{host}"
    if not port.isdigit() or not port.isascii() or not 0 < int(port) < 65536:
        raise ValueError(f"not an origin: {origin!r} (the port must be a number 1 to 65535)")
    number = int(port)
    if number == SCHEMES[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{number}"


def _check_host(host: str, origin: str) -> str:
    if host.startswith("["):
        try:
            address = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f"not an origin: {origin!r} (not an IPv6 address: {host})") from None
        return f"[{address.compressed}]"
    if not host:
        raise ValueError(f"not an origin: {origin!r} (the host is missing)")
    if not host.isascii():
        raise ValueError(
            f"not an origin: {origin!r} (write an international host name in its ASCII "
            f"form, xn--...)"
        )
    labels = host.split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"not an origin: {origin!r} (not a host name: {host})")
    if labels[-1].isdigit():  # a browser reads such a host as an IPv4 address
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"not an origin: {origin!r} (not an IPv4 address: {host})") from None
    return host


class SiteStore:
    """The site list in one JSON file (default ``sites.json`` in the user's data folder).

    Every method that takes an origin normalises it first (see ``normalize_origin``) and
    raises ``ValueError`` for one that is not an origin. Methods that change the list return
    whether anything changed, and have written the file when they return.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else paths.data_dir() / SITES_FILE
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._cache: tuple[tuple[int, int, int], dict[str, dict[str, Any]]] | None = None

    def state(self, origin: str) -> str:
        """The origin's state: ``active``, ``paused`` or ``blocked`` (``active`` when unknown)."""
        record = self._sites().get(normalize_origin(origin))
        return record["state"] if record else ACTIVE

    def list(self) -> list[SiteEntry]:
        """Every origin the list holds, sorted by origin."""
        return [_entry(origin, record) for origin, record in sorted(self._sites().items())]

    def get(self, origin: str) -> SiteEntry | None:
        """The origin's entry, or ``None`` when the list does not hold it."""
        key = normalize_origin(origin)
        record = self._sites().get(key)
        return _entry(key, record) if record else None

    def pause(self, origin: str, note: str | None = None) -> bool:
        """Pause the origin: its grants stay, but it gets no answer until resumed."""
        return self._set_state(origin, PAUSED, note)

    def resume(self, origin: str) -> bool:
        """Make a paused or blocked origin active again (False when it already was)."""
        return self._set_state(origin, ACTIVE, None)

    def block(self, origin: str, note: str | None = None) -> bool:
        """Block the origin: its requests and links are refused until resumed or forgotten."""
        return self._set_state(origin, BLOCKED, note)

    def forget(self, origin: str) -> bool:
        """Remove the origin from the list (it is ``active`` again); False when it was not there."""
        key = normalize_origin(origin)
        return self._change(lambda sites: sites.pop(key, None) is not None)

    def seen(self, origin: str) -> str:
        """Record that the origin asked for a grant now (first and last seen), keeping its
        state, and return that state."""
        key = normalize_origin(origin)
        now = _now()
        state = ACTIVE

        def update(sites: dict[str, dict[str, Any]]) -> bool:
            nonlocal state
            record = sites.setdefault(key, {"state": ACTIVE, "since": now})
            record.setdefault("firstSeen", now)
            record["lastSeen"] = now
            state = record["state"]
            return True

        self._change(update)
        return state

    def _set_state(self, origin: str, state: str, note: str | None) -> bool:
        key = normalize_origin(origin)

        def update(sites: dict[str, dict[str, Any]]) -> bool:
            record = sites.get(key)
            current = record["state"] if record else ACTIVE
            if current == state and (note is None or (record and record.get("note") == note)):
                return False
            if record is None:
                record = sites[key] = {}
            if current != state:
                record["state"], record["since"] = state, _now()
            if note is not None:
                record["note"] = note
            return True

        return self._change(update)

    def _change(self, update: Callable[[dict[str, dict[str, Any]]], bool]) -> bool:
        """Under the lock: read the file afresh, apply ``update``, write it when it changed."""
        with locked(self._lock_path):
            sites = self._load(use_cache=False)
            if not update(sites):
                return False
            document = {"version": FORMAT_VERSION, "sites": dict(sorted(sites.items()))}
            write_private(self.path, (json.dumps(document, indent=2) + "\n").encode())
            with contextlib.suppress(OSError):
                self._cache = (_identity(os.stat(self.path)), sites)
            return True

    def _sites(self) -> dict[str, dict[str, Any]]:
        return self._load(use_cache=True)

    def _load(self, use_cache: bool) -> dict[str, dict[str, Any]]:
        try:
            with open(self.path, "rb") as file:
                identity = _identity(os.fstat(file.fileno()))
                if use_cache and self._cache is not None and self._cache[0] == identity:
                    return self._cache[1]
                data = file.read()
        except FileNotFoundError:
            self._cache = None
            return {}
        sites = _parse(data, self.path)
        self._cache = (identity, sites)
        # Callers of the cache only read; a change works on its own fresh copy.
        return sites if use_cache else {key: dict(value) for key, value in sites.items()}


def _parse(data: bytes, path: Path) -> dict[str, dict[str, Any]]:
    try:
        document = json.loads(data)
    except ValueError as error:
        raise SiteListError(f"{path} is not JSON: {error}") from None
    if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
        raise SiteListError(f"{path} is not a site list of version {FORMAT_VERSION}")
    sites = document.get("sites")
    if not isinstance(sites, dict):
        raise SiteListError(f"{path} has no 'sites' object")
    for origin, record in sites.items():
        try:
            valid = normalize_origin(origin) == origin
        except ValueError:
            valid = False
        if not valid or not isinstance(record, dict):
            raise SiteListError(f"{path} holds an entry that is not an origin: {origin!r}")
        if record.get("state") not in STATES or not isinstance(record.get("since"), str):
            raise SiteListError(f"{path}: the entry for {origin} has no valid state and since")
    return sites


def _entry(origin: str, record: dict[str, Any]) -> SiteEntry:
    return SiteEntry(
        origin=origin,
        state=record["state"],
        since=record["since"],
        first_seen=record.get("firstSeen"),
        last_seen=record.get("lastSeen"),
        note=record.get("note"),
    )


def _identity(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
