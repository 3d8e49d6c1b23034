"""The demos' one rate limit: at most so many events per key in any minute, shared by the
reference site (codes per visitor address) and the reference platform (codes issued and
redeemed). It imports nothing of the engine."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

#: The default: 10 events a minute per key.
PER_MINUTE = 10
Clock = Callable[[], float]


class RateLimiter:
    """At most ``per_minute`` events per key in any 60 seconds (a sliding window)."""

    def __init__(self, per_minute: int = PER_MINUTE, clock: Clock = time.monotonic) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._events: dict[str, deque[float]] = {}

    def allow(self, key: str) -> bool:
        """Record one event for ``key`` and say whether it is within the limit."""
        now = self._clock()
        for stale in [k for k, times in self._events.items() if not times or times[-1] <= now - 60]:
            del self._events[stale]
        times = self._events.setdefault(key, deque())
        while times and times[0] <= now - 60.0:
            times.popleft()
        if len(times) >= self.per_minute:
            return False
        times.append(now)
        return True
