"""The one loop that answers ``call`` frames on a WebSocket, for either side that answers them:
the local API's ``/v1/ws`` and the wallet on the direct link.

Each text message goes through :func:`~byoa_skills.protocol.frames.read_frame`; a ``call``
runs as one of the connection's :class:`~byoa_skills.protocol.pending.PendingCalls` and is
answered with a ``result`` (``chunk`` frames before it for a streamed answer). A call over the
bound is answered at once, from the reading loop, so that nothing more is read until that
answer is written. A peer that takes no frame in time is closed (1008 ``not reading``) and its
calls cancelled. What differs between the two sides is said by the caller: the bound, the
answer over it, what a refused frame gets, whether ``bye`` ends the session, and the ping.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol

from aiohttp import WSMessage, WSMsgType

from byoa_skills.protocol.frames import (
    CLOSE_NOT_READING,
    MESSAGE_TOO_LARGE,
    Bye,
    Call,
    Close,
    CloseCode,
    Frame,
    FrameError,
    chunk_frame,
    ping_frame,
    read_frame,
    result_frame,
)
from byoa_skills.protocol.pending import PendingCalls, close_within

#: One piece of a streamed answer: ``(choice, text)``, written as a ``chunk`` frame.
SendChunk = Callable[[int, str], Awaitable[None]]
#: Answers one call: given the call and where its pieces go, the result as the wire carries it
#: (``ok``, then ``output`` and ``receipt``, or the refusal). It never raises for a refusal.
AnswerCall = Callable[[Call, SendChunk], Awaitable[Mapping[str, Any]]]
#: Why serving ended: the peer said ``bye`` (where that ends it), went away, sent a frame its
#: side closes on, or stopped reading.
Ending = Literal["bye", "dropped", "malformed", "too-large", "not-reading"]


class CallSocket(Protocol):
    """A WebSocket of either side (aiohttp's client or server response), after its handshake."""

    def __aiter__(self) -> AsyncIterator[WSMessage]: ...

    async def send_str(self, data: str, compress: int | None = None) -> None: ...

    async def close(self, *, code: int = ..., message: bytes = ...) -> bool: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any: ...


async def serve_calls(
    ws: CallSocket,
    answer: AnswerCall,
    *,
    limit: int,
    over_bound: Callable[[Call], Mapping[str, Any]],
    refused: Callable[[FrameError], Frame | Close | None],
    bye_ends: bool = False,
    ping_seconds: float | None = None,
) -> Ending:
    """Answer the calls that come on ``ws`` until the peer leaves or must be left.

    ``limit``: the most calls pending at once; one more gets ``over_bound(call)`` as its
    result at once (which may also record it). ``refused(error)`` says what a text that is not
    a frame gets: a frame to answer it with, a :class:`~byoa_skills.protocol.frames.Close` to
    close the socket with (the serving ends ``malformed``), or None to ignore it. ``bye_ends``:
    whether a ``bye`` ends the serving (``bye``); otherwise it is ignored like ``ping`` and
    types the protocol does not have. ``ping_seconds``: a ``ping`` that often, or none. Calls
    still pending when the serving ends are cancelled.
    """
    pending = PendingCalls(ws.send_str, limit)

    async def run(call: Call) -> None:
        call_id = call.id

        async def chunk(choice: int, text: str) -> None:
            await pending.send(chunk_frame(call_id, choice, text))

        reply = await answer(call, chunk)
        del call  # the answer may wait to be written; the input need not
        await pending.send(result_frame(call_id, reply))

    async def ping(seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            await pending.send(ping_frame())

    async def close_when_stalled() -> None:
        await pending.stalled.wait()
        await close_within(ws, *CLOSE_NOT_READING)

    helpers = [asyncio.create_task(close_when_stalled())]
    if ping_seconds is not None:
        helpers.append(asyncio.create_task(ping(ping_seconds)))
    ending: Ending = "dropped"
    try:
        async for message in ws:
            if message.type == WSMsgType.ERROR:  # the reader's own refusal, closed with its code
                too_large = getattr(message.data, "code", None) == CloseCode.MESSAGE_TOO_BIG
                return "too-large" if too_large else "malformed"
            if message.type != WSMsgType.TEXT:
                continue  # binary and control frames carry nothing here
            try:
                frame = read_frame(message.data)
            except FrameError as error:
                reaction = refused(error)
                if isinstance(reaction, Close):
                    await ws.close(code=reaction.code, message=reaction.reason)
                    return "too-large" if error.code == MESSAGE_TOO_LARGE else "malformed"
                if reaction is not None:
                    await pending.send(reaction)
                frame = None
            finally:
                del message
            if isinstance(frame, Call):
                if pending.full:
                    await pending.send(result_frame(frame.id, over_bound(frame)))
                else:
                    pending.start(run(frame))
            elif isinstance(frame, Bye) and bye_ends:
                ending = "bye"
                break
            del frame  # other frames need no answer
            if pending.stalled.is_set():
                break
    finally:
        for helper in helpers:
            helper.cancel()
        await pending.cancel()
    if pending.stalled.is_set():
        await close_within(ws, *CLOSE_NOT_READING)
        return "not-reading"
    return ending
