"""Native messaging's framing: each message a 32-bit length in the machine's byte order, then
that many bytes of UTF-8 JSON (an object here).

Chromium takes at most 1 MB in one message from a host; a message from the browser is taken
up to :data:`MAX_FROM_BROWSER` bytes (a 15 s clip in base64 fits with room to spare). A
message that breaks the framing ends the conversation: the stream cannot be trusted after it.
"""

from __future__ import annotations

import json
import struct
from typing import Any, BinaryIO

from byoa_skills.protocol.frames import MAX_FRAME_BYTES, FrameError, read_json_object
from byoa_skills.protocol.refusal import Refusal

#: The most bytes in one message to the browser (Chromium's own limit).
MAX_TO_BROWSER = 1024 * 1024
#: The most bytes taken in one message from the browser: the local API's body limit.
MAX_FROM_BROWSER = MAX_FRAME_BYTES
_LENGTH = struct.Struct("=I")


class FramingError(Refusal):
    """A message from the browser that cannot be read: ``code`` says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


class MessageTooLarge(ValueError):
    """A message to the browser over :data:`MAX_TO_BROWSER` bytes: it is never sent."""


def read_message(stream: BinaryIO, limit: int = MAX_FROM_BROWSER) -> dict[str, Any] | None:
    """The next message from ``stream``; None when the stream ends cleanly between messages.
    Raises :class:`FramingError`: ``message-too-large`` over ``limit``, ``truncated`` when the
    stream ends inside a message, ``not-json`` / ``bad-request`` for bytes that are not a JSON
    object in UTF-8."""
    head = _read_exactly(stream, _LENGTH.size)
    if not head:
        return None
    if len(head) < _LENGTH.size:
        raise FramingError("truncated", "the stream ended inside a length")
    (length,) = _LENGTH.unpack(head)
    if length > limit:
        raise FramingError("message-too-large", f"a message of {length} bytes (at most {limit})")
    body = _read_exactly(stream, length)
    if len(body) < length:
        raise FramingError("truncated", f"the stream ended after {len(body)} of {length} bytes")
    try:
        return read_json_object(body.decode("utf-8"), "message")
    except UnicodeDecodeError:
        raise FramingError("not-json", "the message is not UTF-8") from None
    except FrameError as refused:
        raise FramingError(refused.code, refused.message) from None


def encode_message(message: dict[str, Any]) -> bytes:
    """``message`` framed for the browser; raises :class:`MessageTooLarge` over
    :data:`MAX_TO_BROWSER` bytes."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(body) > MAX_TO_BROWSER:
        raise MessageTooLarge(f"a message of {len(body)} bytes (at most {MAX_TO_BROWSER})")
    return _LENGTH.pack(len(body)) + body


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    """Up to ``size`` bytes: fewer only when the stream ends."""
    parts: list[bytes] = []
    left = size
    while left:
        part = stream.read(left)
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)
