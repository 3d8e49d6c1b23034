"""What a paid judge may spend: the visitor's limit per day (UTC), what was spent that day,
and the check before each paid judgement. A local source costs nothing and is not limited
(its judge has no :class:`DailySpend`).

A judgement is let through only while the day's spend, with what the judgements in flight
may cost, stays within the limit (:class:`DailySpend`); a limit of 0, the default, lets none
through. What a judgement cost is counted when its answer comes, whatever the opinion."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol


class SpendLedger(Protocol):
    """Where the judge's spend per day is kept."""

    def spent(self, day: str) -> Decimal:
        """What the judge spent on ``day`` (``YYYY-MM-DD``, UTC)."""
        ...

    def add_spent(self, day: str, cost: Decimal) -> None:
        """Count ``cost`` on ``day``."""
        ...


class MemoryLedger:
    """A ledger in memory (tests, and a wallet without a database)."""

    def __init__(self) -> None:
        self.days: dict[str, Decimal] = {}

    def spent(self, day: str) -> Decimal:
        """What was spent on ``day``."""
        return self.days.get(day, Decimal(0))

    def add_spent(self, day: str, cost: Decimal) -> None:
        """Count ``cost`` on ``day``."""
        self.days[day] = self.spent(day) + cost


def utc_day() -> str:
    """Today, UTC, as ``YYYY-MM-DD``."""
    return time.strftime("%Y-%m-%d", time.gmtime())


@dataclass(frozen=True)
class Reservation:
    """What one paid judgement let through by :meth:`DailySpend.begin` holds until it ends."""

    usd: Decimal
    #: A judgement of unknown price: it ran alone.
    alone: bool = False


class DailySpend:
    """The visitor's daily limit for a paid judge (``limit()``, in USD, read at each check so
    a change applies at once) against ``ledger``.

    Each judgement reserves what it may cost: the source's worst-case estimate, or the cost
    of the last paid judgement when that is more; one is let through only while today's
    spend and every reservation stay within the limit. While no price is known (no estimate,
    no judgement paid yet) the judgements run one at a time, so a burst of calls cannot
    spend past the limit before the first cost is known."""

    def __init__(
        self,
        limit: Callable[[], Decimal],
        ledger: SpendLedger,
        today: Callable[[], str] = utc_day,
    ) -> None:
        self.limit = limit
        self.ledger = ledger
        self.today = today
        self._reserved = Decimal(0)
        self._last = Decimal(0)
        self._unpriced = asyncio.Lock()

    def spent(self) -> Decimal:
        """What the judge spent today."""
        return self.ledger.spent(self.today())

    async def begin(self, estimate: Decimal = Decimal(0)) -> Reservation | None:
        """A reservation for one more paid judgement estimated at ``estimate``, or None when
        it does not fit today's limit; pass it to :meth:`end` when the judgement ends."""
        if max(estimate, self._last) == 0:
            await self._unpriced.acquire()
            if max(estimate, self._last) == 0:
                if self._fits(Decimal(0)):
                    return Reservation(Decimal(0), alone=True)
                self._unpriced.release()
                return None
            self._unpriced.release()  # a price became known while waiting
        usd = max(estimate, self._last)
        if not self._fits(usd):
            return None
        self._reserved += usd
        return Reservation(usd)

    def end(self, reservation: Reservation, cost: Decimal) -> None:
        """The judgement holding ``reservation`` ended, costing ``cost``."""
        if reservation.alone:
            self._unpriced.release()
        else:
            self._reserved -= reservation.usd
        if cost > 0:
            self._last = cost
            self.ledger.add_spent(self.today(), cost)

    def _fits(self, usd: Decimal) -> bool:
        spent, limit = self.spent(), self.limit()
        return spent < limit and spent + self._reserved + usd <= limit
