"""One-time session codes (the limit on asking for them is `byoa_skills.demos.rate`)."""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

CODE_LIFETIME_S = 120.0
CODES_PER_MINUTE = 10
# A used code is remembered this long after it expired, so /byoa/wait keeps saying
# "connected" to a page that polls late; then it is forgotten.
KEEP_USED_S = 600.0

CodeState = Literal["waiting", "connected", "expired"]
Clock = Callable[[], float]


def new_secret() -> str:
    """192 random bits, base64url without padding (32 characters)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(24)).decode("ascii")


@dataclass
class SessionCode:
    """One code: when it stops being usable, whether a wallet used it, the pairing it got."""

    expires: float
    used: bool = False
    pairing: str | None = None


class CodeBook:
    """The codes handed out: single use, valid for ``lifetime`` seconds."""

    def __init__(self, lifetime: float = CODE_LIFETIME_S, clock: Clock = time.monotonic) -> None:
        self.lifetime = lifetime
        self._clock = clock
        self._codes: dict[str, SessionCode] = {}

    def issue(self) -> str:
        """A fresh code."""
        self._prune()
        code = new_secret()
        self._codes[code] = SessionCode(expires=self._clock() + self.lifetime)
        return code

    def state(self, code: object) -> CodeState:
        """``connected`` once a wallet used it, ``waiting`` while usable, else ``expired``."""
        entry = self._codes.get(code) if isinstance(code, str) else None
        if entry is not None and entry.used:
            return "connected"
        if entry is not None and entry.expires > self._clock():
            return "waiting"
        return "expired"

    def use(self, code: object, pairing: str) -> bool:
        """Mark a fresh, unused, unexpired code used by ``pairing``; False for any other."""
        entry = self._codes.get(code) if isinstance(code, str) else None
        if entry is None or entry.used or entry.expires <= self._clock():
            return False
        entry.used, entry.pairing = True, pairing
        return True

    def pairing(self, code: object) -> str | None:
        """The pairing token a wallet got with this code, or None."""
        entry = self._codes.get(code) if isinstance(code, str) else None
        return entry.pairing if entry is not None else None

    def __len__(self) -> int:
        return len(self._codes)

    def _prune(self) -> None:
        now = self._clock()
        stale = [
            code
            for code, entry in self._codes.items()
            if entry.expires + (KEEP_USED_S if entry.used else 0.0) <= now
        ]
        for code in stale:
            del self._codes[code]
