"""Every frame of the direct link and of the local API's WebSocket: one reader, one writer,
one size limit and one set of refusals for the wallet's client, the local API and the
reference site.

A frame is one JSON object in one WebSocket text message, at most 4 MB of UTF-8. The writers
build frames as dicts, :func:`encode` turns any frame into the text sent, and
:func:`read_frame` takes a received text back to a dict or refuses it with a
:class:`FrameError` whose code decides each side's reaction (see :data:`LINK_CLOSE`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NoReturn

#: The largest frame, in UTF-8 bytes: the direct link's 4 MB.
MAX_FRAME_BYTES = 4 * 1024 * 1024
#: The local API still reads a frame up to this size to answer it ``message-too-large``; a
#: larger one closes its WebSocket (1009) unread.
READ_LIMIT_BYTES = 4 * MAX_FRAME_BYTES
#: The longest string a call's ``id`` may be.
MAX_CALL_ID_CHARS = 128

#: Every frame type of the protocol. A frame of another type is read like any other and
#: ignored by every side.
FRAME_TYPES = ("hello", "welcome", "error", "call", "result", "chunk", "ping", "bye", "grant")

#: A frame over :data:`MAX_FRAME_BYTES`.
MESSAGE_TOO_LARGE = "message-too-large"
#: Text that is not JSON, including ``NaN``, ``Infinity`` and ``-Infinity`` (JavaScript's
#: ``JSON.parse`` refuses them) and nesting too deep to read.
NOT_JSON = "not-json"
#: JSON that is not an object, or a ``call`` frame without a usable ``id``.
BAD_REQUEST = "bad-request"
#: Every code a :class:`FrameError` carries.
CODES = (MESSAGE_TOO_LARGE, NOT_JSON, BAD_REQUEST)

#: How either end of the direct link answers a refused frame: the WebSocket close code and
#: reason; a code not listed here (``bad-request``) is ignored like an unknown frame type.
LINK_CLOSE: dict[str, tuple[int, bytes]] = {
    NOT_JSON: (1007, b"malformed"),
    MESSAGE_TOO_LARGE: (1009, b"message too large"),
}

#: A frame as read or before it is written: one JSON object.
Frame = dict[str, Any]


class FrameError(ValueError):
    """A received text that is not a frame: a stable ``code`` (one of :data:`CODES`) and a
    ``message`` for a person."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


# Reading


def _refuse_constant(name: str) -> NoReturn:
    raise FrameError(NOT_JSON, "the frame is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_ENCODER = json.JSONEncoder(allow_nan=False)


def read_frame(text: str) -> Frame:
    """The frame ``text`` carries, as an object of any type, known or not.

    Raises :class:`FrameError`: ``message-too-large`` over :data:`MAX_FRAME_BYTES` of UTF-8,
    ``not-json`` for text that is not JSON, ``bad-request`` for JSON that is not an object
    and for a ``call`` frame whose ``id`` is not :func:`call_id_valid`.
    """
    frame = read_json_object(text)
    if frame.get("type") == "call" and not call_id_valid(frame.get("id")):
        raise FrameError(
            BAD_REQUEST,
            f"a call frame needs an id: an integer or a string of 1 to {MAX_CALL_ID_CHARS} "
            "characters",
        )
    return frame


def read_json_object(text: str, what: str = "frame") -> dict[str, Any]:
    """The JSON object ``text`` holds (a frame, or a request body on the local API), with the
    refusals of :func:`read_frame` but no look at its type."""
    if utf8_length_over(text, MAX_FRAME_BYTES):
        raise FrameError(MESSAGE_TOO_LARGE, f"a {what} over {MAX_FRAME_BYTES} bytes")
    try:
        value = _DECODER.decode(text)
    except FrameError:
        raise FrameError(NOT_JSON, f"the {what} is not JSON") from None
    except (ValueError, RecursionError) as error:
        raise FrameError(NOT_JSON, f"the {what} is not JSON") from error
    if not isinstance(value, dict):
        raise FrameError(BAD_REQUEST, f"a {what} must be a JSON object")
    return value


def utf8_length_over(text: str, limit: int) -> bool:
    """Whether ``text`` takes more than ``limit`` bytes in UTF-8 (a lone surrogate counts
    its 3 bytes); counted only when its length in characters cannot tell."""
    if len(text) > limit:
        return True
    if text.isascii() or len(text) * 4 <= limit:
        return False
    return len(text.encode("utf-8", "surrogatepass")) > limit


def call_id_valid(value: object) -> bool:
    """Whether ``value`` can be a call's ``id``: an integer (not a boolean) or a string of 1
    to :data:`MAX_CALL_ID_CHARS` characters."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (
        isinstance(value, str) and 0 < len(value) <= MAX_CALL_ID_CHARS
    )


# Writing


def encode(frame: Mapping[str, Any]) -> str:
    """The text that carries ``frame``: ``json.dumps``'s default form (``", "`` and ``": "``
    between items, non-ASCII escaped). Raises ``ValueError`` for a NaN or an infinity, which
    :func:`read_frame` would refuse."""
    return _ENCODER.encode(frame)


def grant_object(skills: list[str], expires_at: str, limits: Mapping[str, Any]) -> Frame:
    """The grant as a site sees it, in a ``hello`` and in a ``grant`` frame: its skills, when
    it ends, and the limits in force."""
    return {"skills": skills, "expiresAt": expires_at, "limits": dict(limits)}


def hello_frame(
    session: str | None, pairing: str | None, wallet: Mapping[str, Any], grant: Frame
) -> Frame:
    """The wallet's first frame: the link's session code (None when it comes back with its
    ``pairing``), the wallet's name and version, and :func:`grant_object`."""
    return {"type": "hello", "v": "0.1", "session": session, "pairing": pairing,
            "wallet": dict(wallet), "grant": grant}  # fmt: skip


def welcome_frame(pairing: str, manifest: str) -> Frame:
    """The site's answer to a hello: the pairing token and the link's manifest string, which
    the wallet checks byte for byte."""
    return {"type": "welcome", "pairing": pairing, "manifest": manifest}


def error_frame(code: str, message: str | None = None) -> Frame:
    """A refusal: the site's ``bad-session`` (code only), or the local API's answer to a
    frame it cannot take (code and message)."""
    frame: Frame = {"type": "error", "code": code}
    if message is not None:
        frame["message"] = message
    return frame


def call_frame(call_id: int | str, skill: str, skill_input: Any, params: Any) -> Frame:
    """A site's call of one skill; its result comes back with the same ``id``."""
    return {"type": "call", "id": call_id, "skill": skill, "input": skill_input,
            "params": params}  # fmt: skip


def result_frame(call_id: Any, answer: Mapping[str, Any]) -> Frame:
    """The answer to the call with this ``id``: ``answer`` is the call's result as the wire
    carries it (``ok``, then ``output`` and ``receipt``, or the refusal)."""
    return {"type": "result", "id": call_id, **answer}


def chunk_frame(call_id: Any, choice: int, text: str) -> Frame:
    """One piece of a streamed answer before its ``result``; ``choice`` is named only for the
    alternatives after the first."""
    frame: Frame = {"type": "chunk", "id": call_id, "text": text}
    if choice:
        frame["choice"] = choice
    return frame


def grant_frame(grant: Frame) -> Frame:
    """The site's live grant after a change, as :func:`grant_object`: calls already running
    finish, new ones see the new grant."""
    return {"type": "grant", "grant": grant}


def ping_frame() -> Frame:
    """The wallet's keep-alive, every 30 s; it needs no answer."""
    return {"type": "ping"}


def bye_frame() -> Frame:
    """Either side's last frame before it closes; the session ends."""
    return {"type": "bye"}
