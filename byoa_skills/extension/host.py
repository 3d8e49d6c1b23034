"""The native host: what Chromium starts for the extension. It relays each message to the
running engine's local API and the answer back, starts the engine for a ``request`` when
none runs, and relays a ``request`` only once the engine's models are warm. It decides
nothing: every "no" it meets (no engine, an engine that fails) is the page's same null or
``{ok: false}``.

Nothing but framed answers is ever written to the browser's pipe; everything else goes to
stderr, which Chromium keeps in its own log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import aiohttp

from byoa_skills.consent.desk import CONSENT_SECONDS
from byoa_skills.extension.framing import (
    FramingError,
    MessageTooLarge,
    encode_message,
    read_message,
)
from byoa_skills.protocol.frames import BAD_REQUEST, MAX_CALL_ID_CHARS, call_id_valid

log = logging.getLogger("byoa_skills.native_host")

#: The host's name, as the extension connects to it and its manifest names it.
HOST_NAME = "org.bringyourownagent.wallet"
#: How long a request waits for an engine to come up and warm its models, in seconds.
READY_SECONDS = 300.0
#: How long answers on their way may still be written once the browser closes the pipe.
CLOSING_SECONDS = 2.0
#: What each type answers for every "no" (the page cannot tell them apart).
NO: dict[str, dict[str, Any]] = {
    "request": {"grant": None},
    "call": {"ok": False},
    "release": {"ok": False},
}
#: The fields the host passes on, by type; anything else in a message is dropped.
FIELDS = {
    "request": ("origin", "manifest", "userActivation"),
    "call": ("origin", "grantId", "skill", "input", "params"),
    "release": ("origin", "grantId"),
}
#: What an answer from the engine may carry back, by type.
ANSWER_FIELDS = {"request": ("grant",), "call": ("ok", "output", "grant"), "release": ("ok",)}
#: The answer to a message without a usable ``id`` (one that could not be echoed back within
#: the 1 MB a host's message may take, or none): never relayed, answered with ``id`` null.
BAD_ID: dict[str, Any] = {
    "id": None,
    "ok": False,
    "code": BAD_REQUEST,
    "message": f"a message needs an id: an integer or a string of 1 to {MAX_CALL_ID_CHARS} "
    "characters",
}


class EngineStarter:
    """Starts ``serve`` (``argv``) detached from the host, its output in ``log_path``, at most
    one start at a time; None as ``argv`` never starts one."""

    def __init__(self, argv: Sequence[str] | None, log_path: Path) -> None:
        self.argv = list(argv) if argv is not None else None
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> bool:
        """Start the engine unless this host already started one that still runs; False when
        it may not or cannot."""
        if self.argv is None:
            return False
        if self.process is not None and self.process.poll() is None:
            return True
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "ab") as output:
                self.process = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=output,
                    start_new_session=True,
                )
        except OSError as error:
            log.error("event=engine-start-failed error=%r", str(error))
            return False
        log.info("event=engine-started pid=%d log=%s", self.process.pid, self.log_path)
        return True

    @property
    def exited(self) -> bool:
        """Whether the engine this host started has exited."""
        return self.process is not None and self.process.poll() is not None


class NativeHost:
    """One conversation with the browser: messages in, answers out, relayed to the engine."""

    def __init__(
        self,
        base_url: str,
        token: str,
        starter: EngineStarter,
        *,
        ready_seconds: float = READY_SECONDS,
    ) -> None:
        self.base_url = base_url
        self.token = token
        self.starter = starter
        self.ready_seconds = ready_seconds
        self._session: aiohttp.ClientSession | None = None
        self._write_lock = threading.Lock()
        self._ready_lock: asyncio.Lock | None = None

    async def run(self, stdin: BinaryIO, stdout: BinaryIO) -> int:
        """Relay until the browser closes the pipe (0) or sends what cannot be read (1, with
        a log line); messages are answered as their answers come, many at once."""
        self._ready_lock = asyncio.Lock()
        tasks: set[asyncio.Task[None]] = set()
        status = 0
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=5)
        self._session = aiohttp.ClientSession(timeout=timeout)
        try:
            while True:
                try:
                    message = await asyncio.to_thread(read_message, stdin)
                except FramingError as refused:
                    log.error(
                        "event=host-message-refused code=%s message=%r",
                        refused.code,
                        refused.message,
                    )
                    status = 1
                    break
                if message is None:
                    log.info("event=host-browser-gone")
                    break
                task = asyncio.create_task(self._answer(message, stdout))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            if tasks:  # answers on their way get a moment; a consent waiting is given up
                await asyncio.wait(tasks, timeout=CLOSING_SECONDS)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._session.close()
        return status

    async def _answer(self, message: dict[str, Any], stdout: BinaryIO) -> None:
        message_id = message.get("id")
        if not call_id_valid(message_id):
            shown = message_id[:40] if isinstance(message_id, str) else type(message_id).__name__
            log.warning("event=host-message-bad-id id=%r", shown)
            await asyncio.to_thread(self._write, stdout, BAD_ID, "")
            return
        kind = message.get("type")
        if kind not in FIELDS:
            answer: dict[str, Any] = {"ok": False}
        else:
            answer = await self._relay(str(kind), message)
        await asyncio.to_thread(self._write, stdout, {**answer, "id": message_id}, str(kind))

    async def _relay(self, kind: str, message: dict[str, Any]) -> dict[str, Any]:
        body = {key: message[key] for key in FIELDS[kind] if key in message}
        if kind == "request" and not await self._engine_ready():
            log.info("event=host-no-engine")
            return NO[kind]
        assert self._session is not None
        wait = CONSENT_SECONDS + 60 if kind == "request" else None
        try:
            async with self._session.post(
                f"{self.base_url}/v1/extension/{kind}",
                json=body,
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=aiohttp.ClientTimeout(total=wait, sock_connect=5),
            ) as response:
                if response.status != 200:
                    log.warning(
                        "event=host-engine-refused kind=%s status=%d", kind, response.status
                    )
                    return NO[kind]
                got = await response.json()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as error:
            log.warning("event=host-engine-unreachable kind=%s error=%r", kind, str(error))
            return NO[kind]
        if not isinstance(got, dict):
            return NO[kind]
        return {key: got[key] for key in ANSWER_FIELDS[kind] if key in got} or NO[kind]

    async def _engine_ready(self) -> bool:
        """Whether an engine answers ready, starting one (once) when none answers, and
        waiting for its models to be warm."""
        assert self._ready_lock is not None
        async with self._ready_lock:  # one start and one wait for every request at once
            state = await self._probe()
            if state == "ready":
                return True
            if state == "down" and not self.starter.start():
                return False
            deadline = time.monotonic() + self.ready_seconds
            while time.monotonic() < deadline:
                await asyncio.sleep(0.25)
                state = await self._probe()
                if state == "ready":
                    return True
                if state == "down" and self.starter.exited:
                    log.warning("event=host-engine-exited")
                    return False
            return False

    async def _probe(self) -> str:
        """``ready``, ``warming`` (an engine answers, its models are not warm yet) or
        ``down``."""
        assert self._session is not None
        try:
            async with self._session.get(
                f"{self.base_url}/ready", timeout=aiohttp.ClientTimeout(total=5)
            ) as response:
                return "ready" if response.status == 200 else "warming"
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return "down"

    def _write(self, stdout: BinaryIO, answer: dict[str, Any], kind: str) -> None:
        try:
            framed = encode_message(answer)
        except MessageTooLarge as error:  # never sent: the page gets its "no" instead
            log.error("event=host-answer-too-large type=%s error=%r", kind, str(error))
            framed = encode_message({**NO.get(kind, {"ok": False}), "id": answer["id"]})
        with self._write_lock, contextlib.suppress(BrokenPipeError, ValueError):
            stdout.write(framed)
            stdout.flush()
