"""The calls one WebSocket connection has pending, for either side that answers ``call`` frames
(the wallet on the direct link, the local API's ``/v1/ws``).

A peer that sends calls and never reads the answers must not grow the engine: a connection
keeps at most ``limit`` calls pending (running, or answered and waiting to be written), each
holding only its id and what it runs on; one call over the bound is refused at once, written
from the reading loop, so that nothing more is read until it is written. Every frame must be
taken by the peer within :data:`SEND_SECONDS` of being written; a peer that does not take it
in that time is *stalled*: the connection's owner closes it and cancels its calls, which frees
their slots.

A write does not wait for the peer by itself: the operating system takes megabytes into the
socket's send queue, and aiohttp's writer waits for its transport only now and then. So the
frames a peer has not taken yet are watched: what the transport holds plus what the socket's
send queue holds (sent or not, but not yet acknowledged by the peer). A frame is taken once
that backlog is smaller than what was written after it; one that is not taken within
:data:`SEND_SECONDS` stalls the peer, even while nothing more is written. A write also waits
while the backlog is over :data:`BACKLOG_BYTES`, which bounds what a connection holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import socket
import struct
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Protocol

from byoa_skills.protocol.frames import FrameBase, encode

log = logging.getLogger("byoa_skills.protocol")

#: How long one frame may take to be written before the peer counts as not reading.
SEND_SECONDS = 10.0
#: Calls a connection may have pending beyond the grant's ``maxParallelCalls``: room for
#: answers still being written while the site sends its next calls.
PENDING_MARGIN = 4
#: How long closing a stalled connection may take before its socket is dropped.
CLOSE_SECONDS = 2.0
#: The most bytes a connection holds for its peer before a write waits for the peer to take some.
BACKLOG_BYTES = 256 * 1024
#: ``ioctl`` request for a socket's send queue in bytes, sent or not, not yet acknowledged
#: (Linux ``SIOCOUTQ``); macOS has the ``SO_NWRITE`` option instead.
_SIOCOUTQ = 0x5411
_SO_NWRITE = 0x1024
#: How often a write held back by the backlog looks again.
_WAIT_SECONDS = 0.02


def socket_backlog(sock: Any) -> int:
    """Bytes in ``sock``'s send queue that its peer has not acknowledged; 0 when the system
    does not say or the socket is closed."""
    try:
        fd = sock.fileno()
        if fd < 0:
            return 0
        if sys.platform.startswith("linux"):
            return int(struct.unpack("i", fcntl.ioctl(fd, _SIOCOUTQ, b"\0" * 4))[0])
        if sys.platform == "darwin":
            return int(sock.getsockopt(socket.SOL_SOCKET, _SO_NWRITE))
    except (OSError, ValueError, AttributeError):
        pass
    return 0


def ws_backlog(ws: Any) -> Callable[[], int] | None:
    """What ``ws`` (aiohttp's client or server WebSocket) holds for its peer, in bytes: its
    transport's buffer plus its socket's send queue; None when it has no transport."""
    transport = getattr(getattr(ws, "_writer", None), "transport", None)  # what its writer uses
    if transport is None:
        return None

    def backlog() -> int:
        if transport.is_closing():
            return 0
        held = transport.get_write_buffer_size()
        sock = transport.get_extra_info("socket")
        return held + (socket_backlog(sock) if sock is not None else 0)

    return backlog


def _frame_bytes(text: str, masked: bool) -> int:
    """The bytes one text frame takes on the wire (a client's frames carry a 4-byte mask)."""
    size = len(text.encode())
    return size + (2 if size < 126 else 4 if size < 65536 else 10) + (4 if masked else 0)


class PendingCalls:
    """The pending calls of one connection and the one way their frames are written."""

    def __init__(
        self,
        send_text: Callable[[str], Awaitable[None]],
        limit: int,
        *,
        send_seconds: float = SEND_SECONDS,
        backlog: Callable[[], int] | None = None,
        backlog_bytes: int = BACKLOG_BYTES,
    ) -> None:
        """``send_text`` writes one text message; ``limit`` is the most calls pending;
        ``backlog()`` tells the bytes written that the peer has not taken yet (by default
        :func:`ws_backlog` of the WebSocket whose ``send_str`` is ``send_text``; without one,
        only a write that does not return in time stalls the peer)."""
        self.limit = limit
        self.send_seconds = send_seconds
        #: Set once a frame was not taken in time: the peer does not read.
        self.stalled = asyncio.Event()
        self._send_text = send_text
        ws = getattr(send_text, "__self__", None)
        self._backlog = backlog or ws_backlog(ws)
        self._masked = bool(getattr(getattr(ws, "_writer", None), "use_mask", False))
        self._backlog_bytes = backlog_bytes
        self._sending = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        #: Bytes written so far, and (bytes written up to its end, when) of each frame the
        #: peer may not have taken yet.
        self._written = 0
        self._untaken: deque[tuple[int, float]] = deque()
        self._watch: asyncio.Task[None] | None = None

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

    async def send(self, frame: FrameBase | Mapping[str, Any]) -> bool:
        """Write ``frame`` after the frames before it, within :data:`SEND_SECONDS`; False when
        the connection is gone, or (with :attr:`stalled` set) when it could not be written in
        time or the peer already stalled."""
        if self.stalled.is_set():
            return False
        text = encode(frame)
        try:
            await asyncio.wait_for(self._write(text), self.send_seconds)
        except asyncio.TimeoutError:
            self._stall()
            return False
        except (ConnectionError, RuntimeError):  # the peer is gone: nobody to answer
            return False
        return not self.stalled.is_set()

    async def _write(self, text: str) -> None:
        async with self._sending:
            if self._backlog is not None:
                while self._backlog() > self._backlog_bytes:  # until the peer takes some
                    if self.stalled.is_set():
                        return
                    await asyncio.sleep(_WAIT_SECONDS)
            if self.stalled.is_set():
                return
            await self._send_text(text)
            if self._backlog is not None:
                self._written += _frame_bytes(text, self._masked)
                self._untaken.append((self._written, time.monotonic()))
                if self._watch is None:
                    self._watch = asyncio.create_task(self._watch_untaken())

    @property
    def _poll_seconds(self) -> float:
        return min(0.5, self.send_seconds / 10)

    async def _watch_untaken(self) -> None:
        """Drop the frames the peer took; stall it when the oldest left is late."""
        assert self._backlog is not None
        try:
            while self._untaken and not self.stalled.is_set():
                taken = self._written - self._backlog()
                while self._untaken and self._untaken[0][0] <= taken:
                    self._untaken.popleft()
                if self._untaken and time.monotonic() - self._untaken[0][1] > self.send_seconds:
                    self._stall()
                    break
                await asyncio.sleep(self._poll_seconds)
        finally:
            self._watch = None

    def _stall(self) -> None:
        if not self.stalled.is_set():
            log.warning("event=peer-not-reading pending=%d", len(self._tasks))
            self.stalled.set()

    async def cancel(self) -> None:
        """Cancel every pending call and wait until they are over (a running one frees its
        slot through the shim on the way)."""
        if self._watch is not None:
            self._watch.cancel()
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
    """Close ``ws`` with ``code``, waiting at most ``seconds``, then drop its connection: a
    peer that does not read never takes the close frame, and the close would wait on it. The
    connection is reset, leaving unsent what the peer did not take, so that the peer learns at
    once that it is gone even while its own writes are stuck behind what it does not read (a
    graceful end would queue behind those bytes too)."""
    sock = ws.get_extra_info("socket")
    transport = getattr(getattr(ws, "_writer", None), "transport", None)  # what it writes to
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    closing = asyncio.ensure_future(ws.close(code=code, message=message))
    try:
        await asyncio.wait({closing}, timeout=seconds)
    finally:
        if transport is not None:
            transport.abort()
        elif sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
    await asyncio.wait({closing}, timeout=seconds)
    if closing.done():
        with contextlib.suppress(Exception, asyncio.CancelledError):
            closing.result()
    else:
        closing.cancel()
