"""A bound on judged calls in flight per site: at most :data:`IN_FLIGHT_PER_SITE` of one
site's judged calls (the call and its judge) run at once; the next one waits for a slot, so
one site's calls cannot fill the visitor's text sources and starve the visitor's own calls.
A call waits at most ``wait`` seconds (its deadline): past it, :class:`NoSlot`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

#: Judged calls of one site that run at once; the next waits.
IN_FLIGHT_PER_SITE = 2


class NoSlot(Exception):
    """No slot of the site came free within the call's wait."""


@dataclass
class _Site:
    semaphore: asyncio.Semaphore
    #: Calls holding a slot or waiting for one.
    users: int = 0
    #: Calls holding a slot.
    holding: int = field(default=0)


class SiteSlots:
    """``per_site`` slots for each site, made when a site's first call comes and forgotten
    when its last one ends."""

    def __init__(self, per_site: int = IN_FLIGHT_PER_SITE) -> None:
        if per_site < 1:
            raise ValueError("per_site must be at least 1")
        self.per_site = per_site
        self._slots: dict[str, _Site] = {}

    def in_flight(self, site: str) -> int:
        """How many of ``site``'s judged calls hold a slot now."""
        held = self._slots.get(site)
        return 0 if held is None else held.holding

    @asynccontextmanager
    async def hold(self, site: str, wait: float | None = None) -> AsyncIterator[None]:
        """Hold one of ``site``'s slots for the block, waiting for one when all are held (at
        most ``wait`` seconds, then :class:`NoSlot`; None: as long as it takes)."""
        held = self._slots.setdefault(site, _Site(asyncio.Semaphore(self.per_site)))
        held.users += 1
        try:
            try:
                await asyncio.wait_for(held.semaphore.acquire(), wait)
            except asyncio.TimeoutError:
                raise NoSlot(site) from None
            held.holding += 1
            try:
                yield
            finally:
                held.holding -= 1
                held.semaphore.release()
        finally:
            held.users -= 1
            if held.users == 0:
                self._slots.pop(site, None)
