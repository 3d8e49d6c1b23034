"""The pool's life: whether its workers are starting, warm, being let go, let go, coming
back, or the pool is stopping. One owner of that state, with the moves docs/pool.md draws.

Every state can stop: :meth:`PoolLife.stop` is a move from any of them, and every waiter of
:meth:`PoolLife.wait_for` sees it at once.
"""

from __future__ import annotations

import asyncio
import logging
from enum import Enum

log = logging.getLogger("byoa_skills.pool")


class Life(str, Enum):
    """The states of the pool's life (docs/pool.md#the-pools-life)."""

    #: ``start()`` runs: the first workers load their model and warm up.
    WARMING = "warming"
    #: Calls are taken and the workers run (a dead one is being replaced, perhaps).
    WARM = "warm"
    #: The pool was idle: its workers are being asked to stop.
    LETTING_GO = "letting-go"
    #: Every worker was let go; the front process and the shared memory stay.
    LET_GO = "let-go"
    #: A call, a grant or a warm-up came while let go: the workers start again.
    WAKING = "waking"
    #: No new calls; those taken finish, then the workers stop. It never ends.
    STOPPING = "stopping"


#: The moves each state allows; any state may stop.
MOVES: dict[Life, frozenset[Life]] = {
    Life.WARMING: frozenset({Life.WARM, Life.STOPPING}),
    Life.WARM: frozenset({Life.LETTING_GO, Life.STOPPING}),
    Life.LETTING_GO: frozenset({Life.LET_GO, Life.WAKING, Life.STOPPING}),
    Life.LET_GO: frozenset({Life.WAKING, Life.STOPPING}),
    Life.WAKING: frozenset({Life.WARM, Life.LETTING_GO, Life.STOPPING}),
    Life.STOPPING: frozenset(),
}

#: The states in which the workers are away (being let go, or let go).
AWAY = frozenset({Life.LETTING_GO, Life.LET_GO})


class PoolLife:
    """The pool's current :class:`Life` and the waits on it. A move the state does not allow
    (:data:`MOVES`) is ignored and said so; moving to the state it is in does nothing."""

    def __init__(self) -> None:
        self._state = Life.WARMING
        self._moved = asyncio.Event()

    @property
    def state(self) -> Life:
        """The state now."""
        return self._state

    @property
    def away(self) -> bool:
        """Whether the workers are being let go, or were let go and not woken yet."""
        return self._state in AWAY

    @property
    def stopping(self) -> bool:
        """Whether the pool is stopping (it takes no new calls)."""
        return self._state is Life.STOPPING

    def move(self, to: Life) -> bool:
        """Move to ``to`` if the state now allows it, waking every :meth:`wait_for`; whether
        the state is ``to`` afterwards."""
        if to is self._state:
            return True
        if to not in MOVES[self._state]:
            log.debug("event=pool-life-refused from=%s to=%s", self._state.value, to.value)
            return False
        log.debug("event=pool-life from=%s to=%s", self._state.value, to.value)
        self._state = to
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()
        return True

    def stop(self) -> None:
        """Stop, from whatever state (idempotent)."""
        self.move(Life.STOPPING)

    async def wait_for(self, *states: Life) -> Life:
        """Return the state once it is one of ``states`` or :attr:`Life.STOPPING` (at once
        when it already is)."""
        wanted = {*states, Life.STOPPING}
        while self._state not in wanted:
            await self._moved.wait()
        return self._state
