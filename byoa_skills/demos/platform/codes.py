"""Pairing codes: short-lived, single use, bound to an account, the issuer, the intended
use, the pairing mode and the scope the account holder allows.

A code is 10 characters of an alphabet without look-alikes, shown as ``XXXXX-XXXXX``; case,
spaces and dashes do not matter when it is typed back. Only its SHA-256 digest is kept.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from byoa_skills.demos.platform.errors import (
    PAIRING_CODE_EXPIRED,
    PAIRING_CODE_INVALID,
    PAIRING_CODE_REPLAYED,
    PlatformRefusal,
)

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
LENGTH = 10
CODE_LIFETIME_S = 300.0
#: The one use a code is for.
PAIRING_USE = "byoag-pairing"
#: A code is remembered this long after it expired, to tell "expired" and "used" apart.
KEEP_S = 3600.0


@dataclass
class PairingCode:
    """What a code is bound to, and whether it was used."""

    account: str
    issuer: str
    mode: str
    scope: tuple[str, ...]
    expires: float
    use: str = PAIRING_USE
    used: bool = False


def normalized(text: str) -> str:
    """The code as compared: upper case, without spaces and dashes."""
    return text.upper().replace("-", "").replace(" ", "")


class CodeBook:
    """The codes handed out by one platform."""

    def __init__(
        self,
        issuer: str,
        clock: Callable[[], float] = time.time,
        lifetime: float = CODE_LIFETIME_S,
    ) -> None:
        self.issuer = issuer
        self.lifetime = lifetime
        self._clock = clock
        self._codes: dict[str, PairingCode] = {}

    def issue(self, account: str, mode: str, scope: Sequence[str]) -> str:
        """A fresh code for ``account``, shown as ``XXXXX-XXXXX``."""
        self._prune()
        text = "".join(secrets.choice(ALPHABET) for _ in range(LENGTH))
        self._codes[_digest(text)] = PairingCode(
            account, self.issuer, mode, tuple(scope), self._clock() + self.lifetime
        )
        return f"{text[:5]}-{text[5:]}"

    def redeem(self, text: object) -> PairingCode:
        """Use a code once: the code, now used; a refusal when it is unknown, used or expired
        (``pairing_code_invalid``, ``_replayed``, ``_expired``)."""
        entry = self._codes.get(_digest(normalized(text))) if isinstance(text, str) else None
        if entry is None or entry.issuer != self.issuer or entry.use != PAIRING_USE:
            raise PlatformRefusal(PAIRING_CODE_INVALID, 400)
        if entry.used:
            raise PlatformRefusal(PAIRING_CODE_REPLAYED, 400)
        if entry.expires <= self._clock():
            raise PlatformRefusal(PAIRING_CODE_EXPIRED, 400)
        entry.used = True
        return entry

    def _prune(self) -> None:
        now = self._clock()
        for digest in [d for d, entry in self._codes.items() if entry.expires + KEEP_S <= now]:
            del self._codes[digest]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
