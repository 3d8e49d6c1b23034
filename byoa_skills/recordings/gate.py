"""How many recordings are decoded and cut at once: the others wait their turn, in order,
holding only their bytes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

#: Recordings decoded at once by default.
DEFAULT_AT_ONCE = 2


class RecordingGate:
    """At most ``at_once`` recordings between :meth:`turn`'s entry and exit; the others wait
    in arrival order (a waiter that is cancelled leaves the line)."""

    def __init__(self, at_once: int = DEFAULT_AT_ONCE) -> None:
        if isinstance(at_once, bool) or not isinstance(at_once, int) or at_once < 1:
            raise ValueError(f"at_once must be a whole number of at least 1, got {at_once!r}")
        self.at_once = at_once
        self._turns = asyncio.Semaphore(at_once)
        #: Recordings decoding now, and waiting for their turn.
        self.decoding = 0
        self.waiting = 0

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for a turn, hold it for the block's length."""
        self.waiting += 1
        try:
            await self._turns.acquire()
        finally:
            self.waiting -= 1
        self.decoding += 1
        try:
            yield
        finally:
            self.decoding -= 1
            self._turns.release()
