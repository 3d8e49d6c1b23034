"""The reference site turned hostile: an allowed site that attacks the wallet connected to
it, so that each attack can be replayed against a real engine (``site-demo --hostile KIND``).

- ``never-reads``: sends many short calls whose ids are as long as the protocol allows (128
  characters, echoed in every answer) and never reads an answer, so that the answers fill
  the socket and the wallet's writes wait;
- ``floods``: sends many calls at once, far over the hello's ``maxParallelCalls``, and counts
  the answers (each call must get exactly one);
- ``nests``: sends a frame nested deeper than any JSON reader takes;
- ``huge-ids``: sends calls whose ids are a 1 MB string and an object, then an ordinary call
  (the wallet must ignore the first two and answer the last), then one whose id is NaN
  (not JSON: the wallet closes the link, 1007);
- ``lies-in-welcome``: welcomes the wallet with another manifest than the link's.

What the site saw is kept in :class:`AttackReport`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from byoa_skills.protocol.frames import (
    FrameError,
    Result,
    call_frame,
    encode,
    ping_frame,
    read_frame,
)

KINDS = ("never-reads", "floods", "nests", "huge-ids", "lies-in-welcome")
#: How many calls ``never-reads`` and ``floods`` send.
DEFAULT_CALLS = 1000
#: How long ``never-reads`` holds the socket without reading, at most.
HOLD_SECONDS = 60.0
#: What ``lies-in-welcome`` echoes instead of the link's manifest.
LYING_MANIFEST = "eyJieW9hIjoiMC4xLWRyYWZ0In0"


@dataclass
class AttackReport:
    """What the hostile site did and saw on one connection."""

    kind: str
    sent: int = 0
    #: Result frames by call id (``floods``, ``huge-ids``).
    results: dict[Any, list[dict[str, Any]]] = field(default_factory=dict)
    #: How the wallet closed the socket, if it did: ``(code, reason)``.
    closed_with: tuple[int | None, str] | None = None
    seconds: float = 0.0

    @property
    def answered(self) -> int:
        """Calls with at least one result."""
        return len(self.results)

    @property
    def answered_twice(self) -> int:
        """Calls with more than one result (must be 0)."""
        return sum(1 for frames in self.results.values() if len(frames) > 1)


def silent_clip_base64(seconds: float = 15.0) -> str:
    """A silent 16 kHz mono 16-bit WAV of ``seconds``, as base64."""
    data = b"\0\0" * int(seconds * 16000)
    header = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE"
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, 16000, 32000, 2, 16)
    return base64.b64encode(header + fmt + b"data" + struct.pack("<I", len(data)) + data).decode()


def audio_call(call_id: Any, clip: str) -> str:
    """The text of one ``audio.transcribe`` call frame."""
    skill_input = {"audio": {"mime": "audio/wav", "base64": clip}}
    return encode(call_frame(call_id, "audio.transcribe", skill_input, {"language": "en"}))


async def attack(
    ws: web.WebSocketResponse,
    kind: str,
    gone: Callable[[], bool],
    *,
    calls: int = DEFAULT_CALLS,
    hold: float = HOLD_SECONDS,
    stop_reading: Callable[[], None] | None = None,
) -> AttackReport:
    """Run attack ``kind`` on a welcomed wallet's socket; ``gone()`` tells whether the wallet
    dropped the connection (without reading from it); ``stop_reading()`` stops reading the
    socket itself (``never-reads``), so that what the wallet writes stays in its buffers."""
    report = AttackReport(kind)
    began = time.monotonic()
    try:
        if kind == "never-reads":
            if stop_reading is not None:
                stop_reading()
            await _never_reads(ws, gone, report, calls, hold)
        elif kind == "floods":
            frames = [encode(call_frame(i, "audio.transcribe", {}, {})) for i in range(calls)]
            await _send_all(ws, frames, report)
            await _read_results(ws, report, until=lambda: report.answered >= calls)
        elif kind == "nests":
            with contextlib.suppress(ConnectionError, RuntimeError):
                await ws.send_str('{"type": "call", "id": 1, "input": ' + "[" * 100_000)
                report.sent += 1
            await _read_results(ws, report, until=lambda: False)
        elif kind == "huge-ids":
            clip = silent_clip_base64(1.0)
            frames = [
                audio_call("x" * 1_000_000, clip),
                audio_call({"an": "object"}, clip),
                audio_call(2, clip),
            ]
            await _send_all(ws, frames, report)
            await _read_results(ws, report, until=lambda: 2 in report.results)
            # NaN is not JSON: the wallet closes the link (1007) rather than echo it
            await _send_all(ws, [audio_call(3, clip).replace('"id": 3', '"id": NaN')], report)
            await _read_results(ws, report, until=lambda: False, seconds=30)
        else:
            raise ValueError(f"no attack {kind!r} here (lies-in-welcome lies in the welcome)")
    finally:
        report.seconds = time.monotonic() - began
    return report


def _longest_id(number: int) -> str:
    """A call id of the most characters the protocol takes (128), which every answer echoes."""
    return f"{number:0128d}"


async def _send_all(ws: web.WebSocketResponse, frames: Iterable[str], report: AttackReport) -> None:
    with contextlib.suppress(ConnectionError, RuntimeError):
        for text in frames:
            await ws.send_str(text)
            report.sent += 1


async def _never_reads(
    ws: web.WebSocketResponse,
    gone: Callable[[], bool],
    report: AttackReport,
    calls: int,
    hold: float,
) -> None:
    clip = silent_clip_base64(0.1)
    frames = (audio_call(_longest_id(i), clip) for i in range(calls))
    sending = asyncio.create_task(_send_all(ws, frames, report))
    deadline = time.monotonic() + hold
    dropped = False
    probe_at = 0.0
    while time.monotonic() < deadline and not gone():
        await asyncio.sleep(0.1)
        if sending.done() and time.monotonic() >= probe_at:
            # every call is sent: a ping a second, so that a wallet that closed the
            # connection meanwhile is noticed without reading (its close is never read)
            probe_at = time.monotonic() + 1.0
            try:
                await asyncio.wait_for(ws.send_str(encode(ping_frame())), 1.0)
            except asyncio.TimeoutError:  # the wallet is not taking frames now: look again
                continue
            except (ConnectionError, RuntimeError):
                dropped = True
                break
    sending.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sending
    if dropped or gone():
        report.closed_with = (None, "dropped")


async def _read_results(
    ws: web.WebSocketResponse,
    report: AttackReport,
    until: Callable[[], bool],
    seconds: float = 120.0,
) -> None:
    deadline = time.monotonic() + seconds
    while not until() and time.monotonic() < deadline:
        try:
            message = await ws.receive(timeout=max(deadline - time.monotonic(), 0.01))
        except asyncio.TimeoutError:
            return
        if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
            report.closed_with = (ws.close_code, str(message.extra or ""))
            return
        if message.type != WSMsgType.TEXT:
            continue
        try:
            frame = read_frame(message.data)
        except FrameError:
            continue  # not a frame: no answer to any call
        if isinstance(frame, Result):
            report.results.setdefault(_key(frame.id), []).append(frame.to_json())


def _key(call_id: Any) -> Any:
    return call_id if isinstance(call_id, (int, str)) else repr(call_id)
