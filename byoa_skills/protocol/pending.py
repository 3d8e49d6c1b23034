"""The calls one WebSocket connection has pending, for either side that answers ``call`` frames
(the wallet on the direct link, the local API's ``/v1/ws``).

A peer that sends calls and never reads the answers must not grow the engine: a connection
keeps at most ``limit`` calls pending (running, or answered and waiting to be written), each
holding only its id and what it runs on; one call over the bound is refused at once, written
from the reading loop, so that nothing more is read until it is written. Every frame is
written within :data:`SEND_SECONDS`; a peer that takes none in that time is *stalled*: the
connection's owner closes it and cancels its calls, which frees their slots.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from byoa_skills.protocol.frames import Frame, encode

log = logging.getLogger("byoa_skills.protocol")

#: How long one frame may take to be written before the peer counts as not reading.
SEND_SECONDS = 10.0
#: Calls a connection may have pending beyond the grant's ``maxParallelCalls``: room for
#: answers still being written while the site sends its next calls.
PENDING_MARGIN = 4
#: How long closing a stalled connection may take before its socket is dropped.
CLOSE_SECONDS = 2.0


class PendingCalls:
    """The pending calls of one connection and the one way their frames are written."""

    def __init__(
        self,
        send_text: Callable[[str], Awaitable[None]],
        limit: int,
        *,
        send_seconds: float = SEND_SECONDS,
    ) -> None:
        """``send_text`` writes one text message; ``limit`` is the most calls pending."""
        self.limit = limit
        self.send_seconds = send_seconds
        #: Set once a frame could not be written in time: the peer does not read.
        self.stalled = asyncio.Event()
        self._send_text = send_text
        self._sending = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def full(self) -> bool:
        """Whether one more call would pass the bound."""
        return len(self._tasks) >= self.limit

    def __len__(self) -> int:
        return len(self._tasks)

    def start(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` (one call, up to writing its answer) as a pending call."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def send(self, frame: Frame) -> bool:
        """Write ``frame`` after the frames before it, within :data:`SEND_SECONDS`; False when
        the connection is gone, or (with :attr:`stalled` set) when it could not be written in
        time or the peer already stalled."""
        if self.stalled.is_set():
            return False
        text = encode(frame)
        try:
            await asyncio.wait_for(self._write(text), self.send_seconds)
        except asyncio.TimeoutError:
            log.warning("event=peer-not-reading pending=%d", len(self._tasks))
            self.stalled.set()
            return False
        except (ConnectionError, RuntimeError):  # the peer is gone: nobody to answer
            return False
        return True

    async def _write(self, text: str) -> None:
        async with self._sending:
            await self._send_text(text)

    async def cancel(self) -> None:
        """Cancel every pending call and wait until they are over (a running one frees its
        slot through the shim on the way)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Closable(Protocol):
    """A WebSocket of either side (aiohttp's client or server response)."""

    async def close(self, *, code: int = ..., message: bytes = ...) -> bool: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any: ...


async def close_within(
    ws: Closable, code: int, message: bytes, seconds: float = CLOSE_SECONDS
) -> None:
    """Close ``ws`` with ``code``, waiting at most ``seconds``; then drop its socket (a peer
    that does not read never takes the close frame, and the close would wait on it)."""
    closing = asyncio.ensure_future(ws.close(code=code, message=message))
    done, _ = await asyncio.wait({closing}, timeout=seconds)
    if not done:
        sock = ws.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        await asyncio.wait({closing}, timeout=seconds)
    if closing.done():
        with contextlib.suppress(Exception, asyncio.CancelledError):
            closing.result()
    else:
        closing.cancel()
