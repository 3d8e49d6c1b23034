"""The platform the person names: an exact host name, never a URL.

Discovery is anchored on this name alone, so it is taken only in its canonical form: lowercase
ASCII labels (A-labels for international names), at least two of them, no trailing dot, no
scheme, port, path, query, fragment or credentials, and no IP address. Nothing is rewritten:
a name in another form is refused, with what to give instead.

Loopback development (the developer switch ``BYOA_WALLET_DEV_LOCAL=1``) also takes exactly
``localhost:PORT``, ``127.0.0.1:PORT`` or ``[::1]:PORT``, with an explicit port, over plain
HTTP; nothing else is ever reached without TLS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOST = re.compile(rf"{_LABEL}(?:\.{_LABEL})+")
_LOOPBACK = re.compile(r"(localhost|127\.0\.0\.1|\[::1\]):([1-9][0-9]{0,4})")
_NOT_A_HOST = ("://", "/", "\\", "?", "#", "@", "%")
MAX_NAME = 253


@dataclass(frozen=True)
class PlatformHost:
    """A platform's checked name: ``name`` as the person gave it (the key registrations are
    kept under), the ``host`` to resolve, its ``port``, and whether TLS is used."""

    name: str
    host: str
    port: int
    secure: bool

    @property
    def origin(self) -> str:
        """``https://NAME``, or ``http://NAME`` in loopback development."""
        return f"{'https' if self.secure else 'http'}://{self.name}"

    def url(self, path: str) -> str:
        """The URL of ``path`` (starting with ``/``) on the platform's origin."""
        return self.origin + path


def check_platform_host(text: object, *, dev_local: bool = False) -> PlatformHost:
    """The platform named by ``text``; ``ValueError`` saying what to give instead when it is
    not an exact host name (see the module's rules). ``dev_local`` is the developer switch."""
    if not isinstance(text, str) or not text:
        raise ValueError("give the platform's host name, e.g. platform.example")
    if any(part in text for part in _NOT_A_HOST) or any(ch.isspace() for ch in text):
        raise ValueError(
            f"give the platform's host name only (e.g. platform.example), not {text[:80]!r}"
        )
    loopback = _LOOPBACK.fullmatch(text)
    if loopback:
        port = int(loopback.group(2))
        if not dev_local:
            raise ValueError(
                "a loopback platform is taken only in development (BYOA_WALLET_DEV_LOCAL=1)"
            )
        if port > 65535:
            raise ValueError(f"port {port} is out of range")
        return PlatformHost(text, loopback.group(1).strip("[]"), port, secure=False)
    if ":" in text or "[" in text:
        raise ValueError(
            "give the host name without a port; a port is taken only for loopback "
            "development (localhost:PORT with BYOA_WALLET_DEV_LOCAL=1)"
        )
    if not text.isascii() or text != text.lower():
        raise ValueError("give the host name in lowercase ASCII (A-labels for international names)")
    if text == "localhost" or text.endswith(".localhost"):
        raise ValueError("localhost is taken only as localhost:PORT in development")
    if text.endswith(".") or len(text) > MAX_NAME or not _HOST.fullmatch(text):
        raise ValueError(f"{text!r} is not a host name such as platform.example")
    if text.rsplit(".", 1)[-1].isdigit():
        raise ValueError("give the platform's host name, not an IP address")
    return PlatformHost(text, text, 443, secure=True)
