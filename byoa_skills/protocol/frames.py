"""Every frame of the direct link and of the local API's WebSocket: one typed class per frame
type, one reader, one writer, one size limit, one set of refusals and the close codes, for the
wallet's client, the local API and the reference site.

A frame is one JSON object in one WebSocket text message, at most 4 MB of UTF-8. Each type is
a frozen dataclass (:class:`Hello`, :class:`Welcome`, :class:`Error`, :class:`Call`,
:class:`Result`, :class:`Chunk`, :class:`Grant`, :class:`Ping`, :class:`Bye`); the writers
(``hello_frame`` ...) build them, :func:`encode` turns any frame into the text sent, and
:func:`read_frame` takes a received text back to its frame, to :class:`Ignored` for a type
the protocol does not have, or refuses it with a :class:`FrameError` whose code decides each
side's reaction (see :data:`LINK_CLOSE`).

A frame read carries what the peer sent: a field it left out reads as its class's default
(``None``, or :data:`ABSENT` for a field that may be left out), and a field's value is the JSON
the peer sent, checked by the side that uses it; only a call's ``id`` is checked here, since a
result must name its call.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, NamedTuple, NoReturn

from byoa_skills.protocol.refusal import Refusal

#: The largest frame, in UTF-8 bytes: the direct link's 4 MB.
MAX_FRAME_BYTES = 4 * 1024 * 1024
#: The local API still reads a frame up to this size to answer it ``message-too-large``; a
#: larger one closes its WebSocket (1009) unread.
READ_LIMIT_BYTES = 4 * MAX_FRAME_BYTES
#: The longest string a call's ``id`` may be.
MAX_CALL_ID_CHARS = 128
#: The protocol version a hello states.
PROTOCOL_VERSION = "0.1"

#: A frame over :data:`MAX_FRAME_BYTES`.
MESSAGE_TOO_LARGE = "message-too-large"
#: Text that is not JSON, including ``NaN``, ``Infinity`` and ``-Infinity`` (JavaScript's
#: ``JSON.parse`` refuses them) and nesting too deep to read.
NOT_JSON = "not-json"
#: JSON that is not an object, or a ``call`` frame without a usable ``id``.
BAD_REQUEST = "bad-request"
#: Every code a :class:`FrameError` carries.
CODES = (MESSAGE_TOO_LARGE, NOT_JSON, BAD_REQUEST)

#: Any JSON value, as the peer sent it (the side that uses it checks it).
Json = Any
#: A call's ``id`` as :func:`read_frame` lets it through: an integer or a short string.
CallId = int | str


class CloseCode(enum.IntEnum):
    """The WebSocket close codes the protocol's sides send (RFC 6455, section 7.4.1)."""

    #: The session ended: the reference site's answer to a ``bye``.
    NORMAL = 1000
    #: A frame that is not JSON (``malformed``).
    INVALID_TEXT = 1007
    #: No hello in time, a bad session, or a peer that does not read the frames sent to it.
    POLICY_VIOLATION = 1008
    #: A frame over the limit.
    MESSAGE_TOO_BIG = 1009


class Close(NamedTuple):
    """How a side closes a WebSocket: the code and the reason sent with it."""

    code: CloseCode
    reason: bytes


#: A frame that is not JSON.
CLOSE_MALFORMED = Close(CloseCode.INVALID_TEXT, b"malformed")
#: A frame over :data:`MAX_FRAME_BYTES` that got as far as the reader.
CLOSE_TOO_LARGE = Close(CloseCode.MESSAGE_TOO_BIG, b"message too large")
#: A peer that took no frame for :data:`~byoa_skills.protocol.pending.SEND_SECONDS`.
CLOSE_NOT_READING = Close(CloseCode.POLICY_VIOLATION, b"not reading")
#: The site: no hello within its 10 s.
CLOSE_NO_HELLO = Close(CloseCode.POLICY_VIOLATION, b"no hello")
#: The site: a hello with a code or pairing it does not know, after its ``bad-session`` error.
CLOSE_BAD_SESSION = Close(CloseCode.POLICY_VIOLATION, b"bad-session")
#: The site: the wallet said ``bye``.
CLOSE_BYE = Close(CloseCode.NORMAL, b"")

#: How either end of the direct link answers a refused frame; a code not listed here
#: (``bad-request``) is ignored like an unknown frame type.
LINK_CLOSE: dict[str, Close] = {NOT_JSON: CLOSE_MALFORMED, MESSAGE_TOO_LARGE: CLOSE_TOO_LARGE}


class _Absent(enum.Enum):
    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


#: A field a frame does not carry: left out of the text written, and what a field that may be
#: left out reads as when the peer left it out.
ABSENT = _Absent.ABSENT


def present(value: Json, default: Json = None) -> Json:
    """``value``, or ``default`` when it is :data:`ABSENT`."""
    return default if value is ABSENT else value


def _wire(name: str, default: Json = None) -> Any:
    """A field whose JSON name is ``name`` (``expiresAt``) rather than its Python name."""
    return field(default=default, metadata={"wire": name})


class FrameBase:
    """What every typed frame has: its ``type`` on the wire, and the JSON object it is."""

    __slots__ = ()
    #: The frame's ``type``, the first member of its JSON object.
    type: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        """The JSON object this frame is: ``type`` first, then its fields in order, less
        those that are :data:`ABSENT`."""
        frame: dict[str, Any] = {"type": self.type}
        for name, wire in _wire_names(type(self)):
            value = getattr(self, name)
            if value is not ABSENT:
                frame[wire] = value
        return frame

    @classmethod
    def from_json(cls, frame: Mapping[str, Any]) -> Any:
        """The frame a received JSON object of this type is (its ``type`` is not looked at,
        its unknown members are dropped, a missing one is the field's default)."""
        names = _wire_names(cls)
        return cls(**{name: frame[wire] for name, wire in names if wire in frame})


@functools.cache
def _wire_names(cls: type[FrameBase]) -> tuple[tuple[str, str], ...]:
    return tuple((f.name, f.metadata.get("wire", f.name)) for f in fields(cls))  # type: ignore[arg-type]


_frame = dataclass(frozen=True, kw_only=True, slots=True)


@_frame
class Hello(FrameBase):
    """The wallet's first frame, after the visitor's Allow: the link's session code (None when
    it comes back with its ``pairing``), the wallet's name and version, and the grant as
    :func:`grant_object` writes it."""

    type: ClassVar[str] = "hello"
    v: Json = None
    session: Json = None
    pairing: Json = None
    wallet: Json = None
    grant: Json = None


@_frame
class Welcome(FrameBase):
    """The site's answer to a hello: the pairing token and the link's manifest string, which
    the wallet checks byte for byte."""

    type: ClassVar[str] = "welcome"
    pairing: Json = None
    manifest: Json = None


@_frame
class Error(FrameBase):
    """A refusal: the site's ``bad-session`` (code only), or the local API's answer to a frame
    it cannot take (code and message)."""

    type: ClassVar[str] = "error"
    code: Json = None
    message: Json = ABSENT


@_frame
class Call(FrameBase):
    """A call of one skill; its result comes back with the same ``id``. On the local API's
    WebSocket a call may also name the road it takes (``grantId``, ``registration``) and its
    ``deadlineSeconds``, as the HTTP body does."""

    type: ClassVar[str] = "call"
    id: CallId
    skill: Json = None
    input: Json = None
    params: Json = None
    deadline_seconds: Json = _wire("deadlineSeconds", ABSENT)
    grant_id: Json = _wire("grantId", ABSENT)
    registration: Json = ABSENT


@_frame
class Result(FrameBase):
    """The answer to the call with this ``id``: ``ok``, then ``output`` and ``receipt``, or
    the refusal (``code``, ``message``, ``decision`` and ``reasons`` only to the local
    caller; a site sees ``ok: false`` alone)."""

    type: ClassVar[str] = "result"
    id: Json = None
    ok: Json = None
    output: Json = ABSENT
    receipt: Json = ABSENT
    code: Json = ABSENT
    message: Json = ABSENT
    decision: Json = ABSENT
    reasons: Json = ABSENT


@_frame
class Chunk(FrameBase):
    """One piece of a streamed answer before its ``result``; ``choice`` is carried only for
    the alternatives after the first."""

    type: ClassVar[str] = "chunk"
    id: Json = None
    text: Json = None
    choice: Json = ABSENT


@_frame
class Grant(FrameBase):
    """The site's live grant after a change, as :func:`grant_object`: calls already running
    finish, new ones see the new grant."""

    type: ClassVar[str] = "grant"
    grant: Json = None


@_frame
class Ping(FrameBase):
    """The wallet's keep-alive, every 30 s; it needs no answer."""

    type: ClassVar[str] = "ping"


@_frame
class Bye(FrameBase):
    """Either side's last frame before it closes; the session ends."""

    type: ClassVar[str] = "bye"


@dataclass(frozen=True, slots=True)
class Ignored:
    """What :func:`read_frame` gives for a JSON object whose ``type`` the protocol does not
    have (``kind``, or None for none): every side ignores it, so that a new frame can reach
    one side at a time."""

    kind: Json = None


#: A frame of one of the protocol's types.
Frame = Hello | Welcome | Error | Call | Result | Chunk | Grant | Ping | Bye

_TYPES: dict[str, type[FrameBase]] = {
    cls.type: cls for cls in (Hello, Welcome, Error, Call, Result, Chunk, Ping, Bye, Grant)
}
#: Every frame type of the protocol. A frame of another type reads as :class:`Ignored`.
FRAME_TYPES = tuple(_TYPES)


class FrameError(Refusal, ValueError):
    """A received text that is not a frame: a stable ``code`` (one of :data:`CODES`) and a
    ``message`` for a person."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


# Reading


def _refuse_constant(name: str) -> NoReturn:
    raise FrameError(NOT_JSON, "the frame is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_ENCODER = json.JSONEncoder(allow_nan=False)


def read_frame(text: str) -> Frame | Ignored:
    """The frame ``text`` carries, typed by its ``type``; :class:`Ignored` for a type the
    protocol does not have.

    Raises :class:`FrameError`: ``message-too-large`` over :data:`MAX_FRAME_BYTES` of UTF-8,
    ``not-json`` for text that is not JSON, ``bad-request`` for JSON that is not an object
    and for a ``call`` frame whose ``id`` is not :func:`call_id_valid`.
    """
    frame = read_json_object(text)
    kind = frame.get("type")
    cls = _TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return Ignored(kind)
    if cls is Call and not call_id_valid(frame.get("id")):
        raise FrameError(
            BAD_REQUEST,
            f"a call frame needs an id: an integer or a string of 1 to {MAX_CALL_ID_CHARS} "
            "characters",
        )
    typed: Frame = cls.from_json(frame)
    return typed


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


def encode(frame: FrameBase | Mapping[str, Any]) -> str:
    """The text that carries ``frame`` (a typed frame, or any JSON object such as the wallet
    page's events): ``json.dumps``'s default form (``", "`` and ``": "`` between items,
    non-ASCII escaped). Raises ``ValueError`` for a NaN or an infinity, which
    :func:`read_frame` would refuse."""
    return _ENCODER.encode(frame.to_json() if isinstance(frame, FrameBase) else frame)


def grant_object(
    skills: list[str],
    expires_at: str,
    limits: Mapping[str, Any],
    models: Sequence[str] = (),
    *,
    paused: bool = False,
) -> dict[str, Any]:
    """The grant as a site sees it, in a ``hello`` and in a ``grant`` frame: its skills, when
    it ends, the limits in force, the codes of the models ticked (``m1``..., only when there
    are any: never the visitor's model names) and ``paused: true`` while the visitor has
    paused the site."""
    grant: dict[str, Any] = {"skills": skills, "expiresAt": expires_at, "limits": dict(limits)}
    if models:
        grant["models"] = list(models)
    if paused:
        grant["paused"] = True
    return grant


def hello_frame(
    session: str | None, pairing: str | None, wallet: Mapping[str, Any], grant: Mapping[str, Any]
) -> Hello:
    """The wallet's :class:`Hello` at :data:`PROTOCOL_VERSION`."""
    return Hello(
        v=PROTOCOL_VERSION, session=session, pairing=pairing, wallet=dict(wallet), grant=grant
    )


def welcome_frame(pairing: str, manifest: str) -> Welcome:
    """The site's :class:`Welcome`."""
    return Welcome(pairing=pairing, manifest=manifest)


def error_frame(code: str, message: str | None = None) -> Error:
    """An :class:`Error`; without ``message`` the frame carries the code alone."""
    return Error(code=code, message=ABSENT if message is None else message)


def call_frame(call_id: CallId, skill: str, skill_input: Any, params: Any) -> Call:
    """A site's :class:`Call` of one skill."""
    return Call(id=call_id, skill=skill, input=skill_input, params=params)


def result_frame(call_id: Json, answer: Mapping[str, Any]) -> Result:
    """The :class:`Result` of the call with this ``id``: ``answer`` is the call's result as
    the wire carries it (``ok``, then ``output`` and ``receipt``, or the refusal); a member
    :class:`Result` has no field for is an error."""
    return Result(id=call_id, **answer)


def chunk_frame(call_id: Json, choice: int, text: str) -> Chunk:
    """A :class:`Chunk` of the answer's alternative ``choice`` (0 for the first, not written)."""
    return Chunk(id=call_id, text=text, choice=choice or ABSENT)


def grant_frame(grant: Mapping[str, Any]) -> Grant:
    """A :class:`Grant` carrying ``grant`` as :func:`grant_object` writes it."""
    return Grant(grant=dict(grant))


def ping_frame() -> Ping:
    """A :class:`Ping`."""
    return Ping()


def bye_frame() -> Bye:
    """A :class:`Bye`."""
    return Bye()
