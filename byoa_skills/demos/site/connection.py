"""One wallet's WebSocket after its hello: calls out, results back, at most N in flight, and
the grant as the wallet last told it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from byoa_skills.protocol.frames import (
    Chunk,
    FrameBase,
    Grant,
    Hello,
    Result,
    bye_frame,
    call_frame,
    encode,
)

DEFAULT_PARALLEL_CALLS = 4
DEFAULT_CALL_TIMEOUT_S = 20.0


def parallel_limit(grant: object) -> int:
    """The grant's ``limits.maxParallelCalls``, or 4 when it states none (or no usable one)."""
    limits = grant.get("limits") if isinstance(grant, dict) else None
    value = limits.get("maxParallelCalls") if isinstance(limits, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return DEFAULT_PARALLEL_CALLS


class WalletConnection:
    """A wallet's live socket, its pairing, its hello, the grant as the wallet last told it,
    and the calls waiting for a result."""

    def __init__(self, ws: web.WebSocketResponse, pairing: str, hello: Hello) -> None:
        self.ws = ws
        self.pairing = pairing
        self.hello = hello
        grant = hello.grant
        #: The grant as the wallet last told it: the hello's, then each ``grant`` frame's.
        self.grant: dict[str, Any] = grant if isinstance(grant, dict) else {}
        #: Every grant the wallet told on this socket, the hello's first.
        self.grants: list[dict[str, Any]] = [self.grant]
        self.max_parallel_calls = parallel_limit(grant)
        #: Whether the wallet said ``bye``: its grant ended.
        self.said_bye = False
        self.calls_sent = 0
        self.calls_refused = 0
        self._pending: dict[int, asyncio.Future[Result]] = {}
        #: The pieces of each streamed answer, by call id, in the order they came.
        self.chunks: dict[int, list[str]] = {}
        self._sending = asyncio.Lock()

    @property
    def in_flight(self) -> int:
        """Calls sent on this connection that have no result yet."""
        return len(self._pending)

    @property
    def closed(self) -> bool:
        """Whether the socket is closing or closed."""
        return self.ws.closed

    async def call(
        self,
        call_id: int,
        skill: str,
        skill_input: Any,
        params: Any,
        timeout: float = DEFAULT_CALL_TIMEOUT_S,
    ) -> dict[str, Any] | None:
        """Send one call frame and wait for its result frame.

        The result frame's JSON object when it says ``ok: true``; None for ``ok: false``, no
        answer within ``timeout`` seconds, a closed socket, or a call over the grant's
        maxParallelCalls (that one is refused here and never sent).
        """
        if self.closed or len(self._pending) >= self.max_parallel_calls:
            self.calls_refused += 1
            return None
        answer: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = answer
        try:
            await self.send(call_frame(call_id, skill, skill_input, params))
            self.calls_sent += 1
            result = await asyncio.wait_for(answer, timeout)
        except (asyncio.TimeoutError, ConnectionError, RuntimeError):
            return None
        finally:
            self._pending.pop(call_id, None)
        return result.to_json() if result.ok is True else None

    async def send(self, frame: FrameBase | Mapping[str, Any]) -> None:
        """Send one frame, one at a time on this socket."""
        async with self._sending:
            await self.ws.send_str(encode(frame))

    def resolve(self, frame: Result) -> None:
        """Hand a result frame to the call waiting for its id; others are ignored."""
        call_id = frame.id
        if not isinstance(call_id, int) or isinstance(call_id, bool):
            return
        answer = self._pending.get(call_id)
        if answer is not None and not answer.done():
            answer.set_result(frame)

    def take_grant(self, frame: Grant) -> None:
        """The wallet's grant after a change: new calls see its limits (calls running finish);
        a frame whose ``grant`` is not an object is ignored."""
        if isinstance(frame.grant, dict):
            self.grant = frame.grant
            self.grants.append(frame.grant)
            self.max_parallel_calls = parallel_limit(frame.grant)

    def take_chunk(self, frame: Chunk) -> None:
        """Keep one piece of a streamed answer for a call that waits for its result."""
        call_id, text = frame.id, frame.text
        if call_id in self._pending and isinstance(text, str):
            self.chunks.setdefault(call_id, []).append(text)

    def fail_pending(self) -> None:
        """The socket is gone: every call still waiting gets ``ok: false`` now."""
        for answer in self._pending.values():
            if not answer.done():
                answer.set_result(Result(ok=False))

    async def say_bye_and_close(self) -> None:
        """Send ``bye`` and close: another socket took over this pairing."""
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.send(bye_frame())
        self.fail_pending()
        await self.ws.close()
