"""Getting into the wallet page: one-time tickets traded once for a session cookie.

``byoa-skills wallet`` (or the engine itself, when a consent waits) asks for a ticket with the
API token and opens the page with the ticket in the URL fragment, which never reaches a server
log or a ``Referer``. The page trades it, once and within 60 s, for a session cookie that is
``HttpOnly``, ``SameSite=Strict`` and limited to ``Path=/wallet``.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable

#: How long a ticket may wait to be traded, in seconds.
TICKET_SECONDS = 60.0
#: How long a page session lasts, in seconds (the engine forgets every session when it stops).
SESSION_SECONDS = 12 * 3600.0
#: The session cookie's name.
COOKIE = "byoa_wallet"
#: The cookie's path: the wallet page's routes only.
COOKIE_PATH = "/wallet"


class WalletSessions:
    """The tickets not yet traded and the live page sessions, in memory."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tickets: dict[str, float] = {}
        self._sessions: dict[str, float] = {}

    def new_ticket(self) -> str:
        """A fresh one-time ticket (256 random bits), good for :data:`TICKET_SECONDS`."""
        self._forget_old()
        ticket = secrets.token_urlsafe(32)
        self._tickets[ticket] = self._clock() + TICKET_SECONDS
        return ticket

    def trade(self, ticket: object) -> str | None:
        """A new session id for a ticket that is known, unused and not expired; None
        otherwise. The ticket is used up either way."""
        if not isinstance(ticket, str) or len(ticket) > 100:
            return None
        expires = self._tickets.pop(ticket, None)
        if expires is None or expires < self._clock():
            return None
        session = secrets.token_urlsafe(32)
        self._sessions[session] = self._clock() + SESSION_SECONDS
        return session

    def valid(self, session: str | None) -> bool:
        """Whether ``session`` (a cookie's value) is a live session; never for a value that is
        not ASCII, as no session id is (one that is not UTF-8 reaches here as surrogates)."""
        if not session or not session.isascii():
            return False
        for known, expires in self._sessions.items():
            if hmac.compare_digest(known.encode(), session.encode()):
                return expires >= self._clock()
        return False

    def end(self, session: str | None) -> None:
        """End a session (the page's sign-out)."""
        if session:
            self._sessions.pop(session, None)

    def _forget_old(self) -> None:
        now = self._clock()
        self._tickets = {t: e for t, e in self._tickets.items() if e >= now}
        self._sessions = {s: e for s, e in self._sessions.items() if e >= now}


def cookie_header(session: str) -> str:
    """The ``Set-Cookie`` value for a session."""
    return (
        f"{COOKIE}={session}; Path={COOKIE_PATH}; HttpOnly; SameSite=Strict; "
        f"Max-Age={int(SESSION_SECONDS)}"
    )
