"""How the pairing code reaches the connector without passing through a model.

The code is typed at a protected prompt (no echo) and never taken as a command-line
argument, logged, or stored with a registration. A client that can only pass tool arguments
gets an opaque single-use reference instead: the person types the code at the prompt once,
the connector holds it for one platform for 10 minutes, and the client passes the reference.
Only where a client can pass nothing but the plain code does it read the code from standard
input, after telling the person :data:`MODEL_VISIBLE_NOTICE`.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from byoa_skills.byoag.errors import PAIRING_CODE_INVALID, ByoagError
from byoa_skills.store import paths
from byoa_skills.store.files import locked, write_private

#: How long a held code waits for its reference.
HOLD_SECONDS = 600
MAX_CODE = 64
REFERENCE_PREFIX = "byoag-code-ref-"
#: What a client that passes the plain code as an ordinary argument must say first.
MODEL_VISIBLE_NOTICE = (
    "The one-time pairing code, passed as an ordinary argument, may be visible to a model. "
    "To keep it out of model context, type it at the protected prompt instead "
    "(byoa-skills pair DOMAIN, or byoa-skills pair DOMAIN --hold-code for a reference)."
)


def clean_code(text: str) -> str:
    """The code as typed, without surrounding white space; ValueError when empty, too long
    or not printable ASCII. (Its format is the platform's: it is checked there.)"""
    code = text.strip()
    if not code or len(code) > MAX_CODE or not code.isascii() or not code.isprintable():
        raise ValueError("a pairing code is 1 to 64 printable ASCII characters")
    return code


def read_code(
    prompt: str = "Pairing code (not shown): ", ask: Callable[[str], str] | None = None
) -> str:
    """The code typed at a protected prompt (``getpass``: no echo), or asked with ``ask``."""
    return clean_code((ask or getpass.getpass)(prompt))


class HeldCodes:
    """Codes typed at the protected prompt, each held for one platform under an opaque
    single-use reference, in ``byoag/held-codes.json`` in the user's data folder (mode 0600).
    References are kept only as SHA-256 digests."""

    def __init__(
        self,
        path: Path | None = None,
        clock: Callable[[], float] = time.time,
        lifetime: float = HOLD_SECONDS,
    ) -> None:
        self.path = path or paths.data_dir() / "byoag" / "held-codes.json"
        self._clock = clock
        self.lifetime = lifetime

    def hold(self, platform: str, code: str) -> str:
        """Hold ``code`` for ``platform``; the reference that gives it back once."""
        reference = REFERENCE_PREFIX + secrets.token_urlsafe(24)
        with self._held() as held:
            held[_digest(reference)] = {
                "platform": platform,
                "code": clean_code(code),
                "until": self._clock() + self.lifetime,
            }
        return reference

    def take(self, reference: str, platform: str) -> str:
        """The code held under ``reference`` for ``platform``, forgotten as it is given (also
        when it was held for another platform); ``pairing_code_invalid`` when no code is held
        under it for this platform any more."""
        with self._held() as held:
            entry = held.pop(_digest(reference), None) if isinstance(reference, str) else None
        if entry is None or entry.get("platform") != platform:
            raise ByoagError(
                PAIRING_CODE_INVALID,
                "no pairing code is held under this reference for this platform",
                reason="unknown-reference",
            )
        return str(entry["code"])

    @contextlib.contextmanager
    def _held(self) -> Iterator[dict[str, dict[str, Any]]]:
        with locked(self.path.with_name(self.path.name + ".lock")):
            held: dict[str, dict[str, Any]] = {}
            with contextlib.suppress(FileNotFoundError, ValueError):
                data = json.loads(self.path.read_bytes())
                held = data if isinstance(data, dict) else {}
            now = self._clock()
            held = {
                k: v
                for k, v in held.items()
                if isinstance(v, dict)
                and isinstance(v.get("until"), (int, float))
                and v["until"] > now
            }
            yield held
            write_private(self.path, json.dumps(held).encode())


def _digest(reference: str) -> str:
    return hashlib.sha256(reference.encode()).hexdigest()
