"""The site's side of the direct link: codes, the wallet's WebSocket, and calls to it."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import socket
import time
from typing import Any

from aiohttp import WSMsgType, web

from byoa_skills.demos.rate import RateLimiter
from byoa_skills.demos.site import hostile as hostile_attacks
from byoa_skills.demos.site.codes import (
    CODE_LIFETIME_S,
    CODES_PER_MINUTE,
    Clock,
    CodeBook,
    CodeState,
    new_secret,
)
from byoa_skills.demos.site.connection import DEFAULT_CALL_TIMEOUT_S, WalletConnection
from byoa_skills.demos.site.manifest import MANIFESTS, MODES, build_link, encode_manifest
from byoa_skills.protocol.frames import (
    CLOSE_BAD_SESSION,
    CLOSE_BYE,
    CLOSE_NO_HELLO,
    LINK_CLOSE,
    MAX_FRAME_BYTES,
    Bye,
    Chunk,
    Close,
    Frame,
    FrameError,
    Grant,
    Hello,
    Ignored,
    Result,
    encode,
    error_frame,
    read_frame,
    welcome_frame,
)

log = logging.getLogger("byoa_skills.demos.site")

HELLO_TIMEOUT_S = 10.0
#: How long the site waits for a text answer: the wallet's own deadline for a call.
TEXT_CALL_TIMEOUT_S = 120.0


def take_frame(text: str) -> Frame | Ignored | Close:
    """A wallet's frame; :class:`~byoa_skills.protocol.frames.Ignored` for one to ignore like
    an unknown type (JSON that is not an object, a call without a usable id); or the close to
    answer a frame that is not JSON (1007 ``malformed``, NaN and Infinity included)."""
    try:
        return read_frame(text)
    except FrameError as refused:
        return LINK_CLOSE.get(refused.code, Ignored())


class SiteDemo:
    """The site's BYOA server state: what the guide's Node.js server keeps.

    ``endpoint`` is the WebSocket URL the link names. ``mode`` is ``geo`` (the geography
    game) or ``text`` (one question for two models); the link carries the mode's manifest
    unless ``manifest`` names another. ``code_lifetime``, ``codes_per_minute`` and
    ``hello_timeout`` default to the guide's 120 s, 10 a minute per address and 10 s.
    """

    def __init__(
        self,
        endpoint: str,
        manifest: dict[str, Any] | None = None,
        *,
        mode: str = "geo",
        code_lifetime: float = CODE_LIFETIME_S,
        codes_per_minute: int = CODES_PER_MINUTE,
        hello_timeout: float = HELLO_TIMEOUT_S,
        clock: Clock = time.monotonic,
        hostile: str | None = None,
        hostile_calls: int = hostile_attacks.DEFAULT_CALLS,
        hostile_hold: float = hostile_attacks.HOLD_SECONDS,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"no mode {mode!r}: {', '.join(MODES)}")
        self.endpoint = endpoint
        #: ``geo`` or ``text``: which page the site serves.
        self.mode = mode
        self.manifest: dict[str, Any] = manifest if manifest is not None else MANIFESTS[mode]
        #: What every link carries: base64url of the manifest's JSON bytes.
        self.manifest64 = encode_manifest(self.manifest)
        #: What every welcome echoes; the same string unless a test changes it.
        self.welcome_manifest = self.manifest64
        self.hello_timeout = hello_timeout
        self.codes = CodeBook(code_lifetime, clock)
        self.limiter = RateLimiter(codes_per_minute, clock)
        #: Every hello that got a welcome, in order, as the JSON object it is.
        self.hellos: list[dict[str, Any]] = []
        self._wallets: dict[str, WalletConnection | None] = {}
        self._latest: dict[str, WalletConnection] = {}
        self._next_id = 0
        self._closing: set[asyncio.Task[None]] = set()
        if hostile is not None and hostile not in hostile_attacks.KINDS:
            raise ValueError(f"no hostile kind {hostile!r}: {', '.join(hostile_attacks.KINDS)}")
        #: The attack this site makes on every wallet after its welcome (``--hostile``).
        self.hostile = hostile
        self.hostile_calls = hostile_calls
        self.hostile_hold = hostile_hold
        #: What each attack saw, in order.
        self.attacks: list[hostile_attacks.AttackReport] = []

    # Codes and links

    def new_code(self, address: str) -> tuple[str, str] | None:
        """``(session code, link)`` for a visitor at ``address``; None over the rate limit."""
        if not self.limiter.allow(address):
            return None
        session = self.codes.issue()
        return session, build_link(self.endpoint, self.manifest64, session)

    def wait_state(self, session: object) -> CodeState:
        """Whether a wallet came with this code: ``waiting``, ``connected`` or ``expired``."""
        return self.codes.state(session)

    # Connections

    def connection(self, pairing_or_session: str) -> WalletConnection | None:
        """The live connection for a pairing token, or for the session code it came with."""
        pairing = self.codes.pairing(pairing_or_session) or pairing_or_session
        live = self._wallets.get(pairing)
        return live if live is not None and not live.closed else None

    def latest_connection(self, pairing_or_session: str) -> WalletConnection | None:
        """The last connection for a pairing token or the session code it came with, live or
        closed; None when no wallet came with it."""
        pairing = self.codes.pairing(pairing_or_session) or pairing_or_session
        return self._latest.get(pairing)

    @property
    def connections(self) -> list[WalletConnection]:
        """Every live wallet connection, one per pairing."""
        return [c for c in self._wallets.values() if c is not None and not c.closed]

    @property
    def pairings(self) -> list[str]:
        """Every pairing token handed out, live or away."""
        return list(self._wallets)

    # Calls

    async def call(
        self,
        pairing_or_session: str,
        skill: str,
        skill_input: Any,
        params: Any = None,
        timeout: float = DEFAULT_CALL_TIMEOUT_S,
    ) -> dict[str, Any] | None:
        """Call a skill on the wallet connected with this pairing or session code.

        The ``result`` frame (``ok``, ``output``, ``receipt``) when it says ``ok: true``;
        None when no wallet is connected, the call is over the hello's maxParallelCalls,
        the wallet says ``ok: false``, or no answer comes within ``timeout`` seconds.
        """
        connection = self.connection(pairing_or_session)
        if connection is None:
            return None
        self._next_id += 1
        return await connection.call(
            self._next_id, skill, skill_input, params if params is not None else {}, timeout
        )

    async def transcribe(
        self,
        session: str,
        wav_bytes: bytes,
        language: str,
        timeout: float = DEFAULT_CALL_TIMEOUT_S,
    ) -> str | None:
        """One clip for the visitor's wallet: the text, or None (then use your own path)."""
        audio = {"mime": "audio/wav", "base64": base64.b64encode(wav_bytes).decode("ascii")}
        result = await self.call(
            session, "audio.transcribe", {"audio": audio}, {"language": language}, timeout
        )
        output = result.get("output") if result is not None else None
        text = output.get("text") if isinstance(output, dict) else None
        return text if isinstance(text, str) else None

    async def generate(
        self,
        pairing_or_session: str,
        question: str,
        params: dict[str, Any],
        timeout: float = TEXT_CALL_TIMEOUT_S,
    ) -> tuple[str | None, int]:
        """One question as a ``text.generate`` call with ``params`` (``model``, ``maxTokens``,
        ``stream``): ``(the answer's text or None, how many chunk frames came before it)``."""
        connection = self.connection(pairing_or_session)
        if connection is None:
            return None, 0
        self._next_id += 1
        call_id = self._next_id
        messages = {"messages": [{"role": "user", "content": question}]}
        result = await connection.call(call_id, "text.generate", messages, params, timeout)
        pieces = connection.chunks.pop(call_id, [])
        output = result.get("output") if result is not None else None
        text = output.get("text") if isinstance(output, dict) else None
        return (text if isinstance(text, str) else None), len(pieces)

    # The WebSocket

    async def handle_socket(self, request: web.Request) -> web.WebSocketResponse:
        """``GET /byoa/ws``: one wallet's socket, from hello to close."""
        ws = web.WebSocketResponse(max_msg_size=MAX_FRAME_BYTES, autoping=True, heartbeat=None)
        await ws.prepare(request)
        connection = await self._await_hello(ws)
        if connection is None:
            return ws
        if self.hostile not in (None, "lies-in-welcome"):
            return await self._attack(request, ws, str(self.hostile))
        try:
            ending = await self._serve(connection)
        finally:
            connection.fail_pending()
            if self._wallets.get(connection.pairing) is connection:
                self._wallets[connection.pairing] = None
            log.info("event=wallet-away pairing=%s…", connection.pairing[:6])
        if ending is not None:
            await ws.close(code=ending.code, message=ending.reason)
        return ws

    async def _attack(
        self, request: web.Request, ws: web.WebSocketResponse, kind: str
    ) -> web.WebSocketResponse:
        def gone() -> bool:
            return request.transport is None or request.transport.is_closing()

        def stop_reading() -> None:
            if request.transport is not None:
                request.transport.pause_reading()
                sock = request.transport.get_extra_info("socket")
                if sock is not None:  # and keep the kernel's buffer small too
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)

        report = await hostile_attacks.attack(
            ws,
            kind,
            gone,
            calls=self.hostile_calls,
            hold=self.hostile_hold,
            stop_reading=stop_reading,
        )
        self.attacks.append(report)
        log.info(
            "event=attack-done kind=%s sent=%d answered=%d closed=%s",
            kind,
            report.sent,
            report.answered,
            report.closed_with,
        )
        with contextlib.suppress(asyncio.TimeoutError, ConnectionError, RuntimeError):
            await asyncio.wait_for(ws.close(), 2.0)
        return ws

    async def close(self) -> None:
        """Say bye to every wallet and close their sockets (the server is stopping)."""
        for connection in self.connections:
            await connection.say_bye_and_close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def _await_hello(self, ws: web.WebSocketResponse) -> WalletConnection | None:
        """Wait for a hello, sending nothing; close 1008 after ``hello_timeout`` without one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.hello_timeout
        while True:
            try:
                message = await ws.receive(timeout=max(deadline - loop.time(), 0.001))
            except asyncio.TimeoutError:
                await ws.close(code=CLOSE_NO_HELLO.code, message=CLOSE_NO_HELLO.reason)
                return None
            if message.type in (
                WSMsgType.CLOSE,
                WSMsgType.CLOSING,
                WSMsgType.CLOSED,
                WSMsgType.ERROR,
            ):
                return None
            if message.type != WSMsgType.TEXT:
                continue
            frame = take_frame(message.data)
            if isinstance(frame, Close):
                await ws.close(code=frame.code, message=frame.reason)
                return None
            if isinstance(frame, Hello):
                return await self._welcome(ws, frame)

    async def _welcome(self, ws: web.WebSocketResponse, hello: Hello) -> WalletConnection | None:
        """Answer a hello: a fresh code or a known pairing gets a welcome, anything else
        ``bad-session`` and a close."""
        session, pairing = hello.session, hello.pairing
        fresh = new_secret()
        if self.codes.use(session, fresh):
            pairing = fresh
        elif not session and isinstance(pairing, str) and pairing in self._wallets:
            old = self._wallets[pairing]
            if old is not None and not old.closed:  # one live connection per pairing
                task = asyncio.create_task(old.say_bye_and_close())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
        else:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await ws.send_str(encode(error_frame("bad-session")))
            await ws.close(code=CLOSE_BAD_SESSION.code, message=CLOSE_BAD_SESSION.reason)
            log.info("event=bad-session")
            return None
        connection = WalletConnection(ws, pairing, hello)
        self._wallets[pairing] = connection
        self._latest[pairing] = connection
        self.hellos.append(hello.to_json())
        manifest = self.welcome_manifest
        if self.hostile == "lies-in-welcome":
            manifest = hostile_attacks.LYING_MANIFEST
        await connection.send(welcome_frame(pairing, manifest))
        log.info(
            "event=wallet-welcomed pairing=%s… max_parallel_calls=%d",
            pairing[:6],
            connection.max_parallel_calls,
        )
        return connection

    async def _serve(self, connection: WalletConnection) -> Close | None:
        """After the welcome: results resolve calls, grant frames change the grant, the rest
        is ignored, until the socket closes (None) or a frame asks to close it: the close
        code and reason to send."""
        ws = connection.ws
        while True:
            message = await ws.receive()
            if message.type in (
                WSMsgType.CLOSE,
                WSMsgType.CLOSING,
                WSMsgType.CLOSED,
                WSMsgType.ERROR,
            ):
                return None
            if message.type != WSMsgType.TEXT:
                continue
            frame = take_frame(message.data)
            if isinstance(frame, Close):
                return frame
            if isinstance(frame, Result):
                connection.resolve(frame)
            elif isinstance(frame, Chunk):
                connection.take_chunk(frame)
            elif isinstance(frame, Grant):
                connection.take_grant(frame)
                log.info(
                    "event=grant-changed pairing=%s… max_parallel_calls=%d",
                    connection.pairing[:6],
                    connection.max_parallel_calls,
                )
            elif isinstance(frame, Bye):
                connection.said_bye = True
                return CLOSE_BYE
