"""What the wallet keeps between connections: pairing tokens of the sites the visitor let it
decide for on its own, and the session codes it saw in the last 10 minutes."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from byoa_skills.store import paths
from byoa_skills.store.files import locked, write_private

#: A session code seen this recently is ignored (the site guide's 10 minutes).
CODE_MEMORY_SECONDS = 600


class PairingStore:
    """Pairings by origin, in ``pairings.json`` in the user's data folder (mode 0600)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.data_dir() / "pairings.json"

    def all(self) -> dict[str, dict[str, Any]]:
        """Every kept pairing, by origin."""
        with contextlib.suppress(FileNotFoundError, ValueError):
            data = json.loads(self.path.read_bytes())
            if isinstance(data, dict):
                return data
        return {}

    def keep(self, origin: str, record: dict[str, Any]) -> None:
        """Keep (or replace) the pairing of ``origin``: endpoint, manifest text, token, grant."""
        self._change(lambda pairings: pairings.__setitem__(origin, record))

    def drop(self, origin: str) -> None:
        """Forget the pairing of ``origin``: a new link is needed."""
        self._change(lambda pairings: pairings.pop(origin, None))

    def _change(self, change: Any) -> None:
        with locked(self.path.with_name(self.path.name + ".lock")):
            pairings = self.all()
            change(pairings)
            write_private(self.path, json.dumps(pairings, indent=1).encode())


class RecentCodes:
    """Session codes seen in the last 10 minutes, kept as SHA-256 digests, shared between
    processes through a file in the user's data folder."""

    def __init__(self, path: Path | None = None, memory: float = CODE_MEMORY_SECONDS) -> None:
        self.path = path or paths.data_dir() / "recent-codes.json"
        self.memory = memory

    def seen(self, code: str) -> bool:
        """Whether ``code`` was seen in the last 10 minutes (remembers nothing)."""
        digest = hashlib.sha256(code.encode()).hexdigest()
        with contextlib.suppress(FileNotFoundError, ValueError):
            seen = json.loads(self.path.read_bytes())
            return isinstance(seen, dict) and time.time() - seen.get(digest, 0) < self.memory
        return False

    def first_sight(self, code: str) -> bool:
        """Remember ``code``; True when it was not seen in the last 10 minutes."""
        digest = hashlib.sha256(code.encode()).hexdigest()
        now = time.time()
        with locked(self.path.with_name(self.path.name + ".lock")):
            seen: dict[str, float] = {}
            with contextlib.suppress(FileNotFoundError, ValueError):
                seen = json.loads(self.path.read_bytes())
            fresh = {k: t for k, t in seen.items() if now - t < self.memory}
            new = digest not in fresh
            fresh[digest] = now if new else fresh[digest]
            write_private(self.path, json.dumps(fresh).encode())
        return new
