"""A ``byoa-skills serve`` process on a free loopback port, and a client that times calls."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from byoa_skills.bench.children import spawn
from byoa_skills.pool.memory import rss_mib as process_rss_mib


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` in MiB; 0 if it is gone."""
    return process_rss_mib(pid) or 0.0


@dataclass
class Timed:
    """One answered call: the client's wait, and the engine's queue and model time (seconds)."""

    waited: float
    queue: float
    infer: float
    #: The encoder window that answered it, in seconds (None: the engine did not say).
    window: float | None = None
    #: Every duration the engine's ``Server-Timing`` gave, in seconds, by metric (the model's
    #: phases ``features``, ``encode``, ``detect``, ``decode``, and ``handoff`` among them).
    timing: dict[str, float] = field(default_factory=dict)

    @property
    def overhead(self) -> float:
        """Seconds of the wait spent outside the queue and the model: HTTP, JSON, base64, WAV."""
        return self.waited - self.queue - self.infer


def _server_timing_metrics(header: str) -> Iterator[tuple[str, dict[str, str]]]:
    """Each metric of a ``Server-Timing`` header: its name and its parameters."""
    for part in header.split(","):
        name, _, rest = part.strip().partition(";")
        parameters = {}
        for parameter in rest.split(";"):
            key, _, value = parameter.strip().partition("=")
            parameters[key] = value
        yield name.strip(), parameters


def parse_server_timing(header: str) -> dict[str, float]:
    """``"queue;dur=1.5, infer;dur=900"`` → ``{"queue": 0.0015, "infer": 0.9}`` (seconds)."""
    return {
        name: float(parameters["dur"]) / 1000
        for name, parameters in _server_timing_metrics(header)
        if "dur" in parameters
    }


def server_timing_window(header: str) -> float | None:
    """``'window;desc="5s"'`` → 5.0: the encoder window a ``Server-Timing`` header names."""
    for name, parameters in _server_timing_metrics(header):
        said = parameters.get("desc", "").strip('"')
        if name == "window" and said.endswith("s"):
            try:
                return float(said[:-1])
            except ValueError:
                return None
    return None


_Engine = TypeVar("_Engine", bound="EngineProcess")


@dataclass
class EngineProcess:
    """A running ``serve``: its process, port, token, home and log."""

    process: subprocess.Popen[bytes]
    port: int
    token: str
    #: The ``BYOA_SKILLS_HOME`` it runs under.
    home: Path
    log: Path
    started: float

    @classmethod
    def start(
        cls: type[_Engine],
        home: Path,
        args: Sequence[str],
        *,
        token: str | None = None,
        log_name: str = "serve.log",
        env: Mapping[str, str] | None = None,
        program: Sequence[str] = (),
    ) -> _Engine:
        """Start ``byoa-skills serve --port P ARGS`` on a free port with
        ``BYOA_SKILLS_HOME=home``, ``token`` (a fresh one when None) and the variables in
        ``env``, its log in ``home/log_name``; returns at once (see :meth:`wait_ready`).
        ``program``: what runs ``byoa-skills`` (default: this Python, ``-m byoa_skills``).
        It ends with this process (:func:`byoa_skills.bench.children.spawn`)."""
        port = free_port()
        token = token or secrets.token_hex(16)
        log = home / log_name
        # the developer switch lets the engine take the reference site's ws://localhost link
        variables = {
            **os.environ,
            "BYOA_SKILLS_HOME": str(home),
            "BYOA_SKILLS_TOKEN": token,
            "BYOA_WALLET_DEV_LOCAL": "1",
            **(env or {}),
        }
        program = program or (sys.executable, "-m", "byoa_skills")
        command = [*program, "serve", "--port", str(port), *args]
        started = time.perf_counter()
        with log.open("wb") as log_file:
            process = spawn(command, stdout=subprocess.DEVNULL, stderr=log_file, env=variables)
        return cls(process, port, token, home, log, started)

    @property
    def url(self) -> str:
        """Base URL of the local API."""
        return f"http://127.0.0.1:{self.port}"

    def _ready_body(self) -> dict[str, Any]:
        """GET /ready's JSON body; empty while the engine does not answer 200."""
        return self._open_json("/ready")

    def health(self) -> dict[str, Any]:
        """GET /health's JSON body (the encoder that runs among it); empty when unanswered."""
        return self._open_json("/health")

    def _open_json(self, path: str) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as response:
                return dict(json.loads(response.read()))
        except (urllib.error.URLError, OSError, ValueError):
            return {}

    def ready(self) -> tuple[bool, list[int]]:
        """``(ready, worker pids)`` from GET /ready."""
        body = self._ready_body()
        return bool(body.get("ready")), [int(p) for p in body.get("workers", [])]

    def warm(self) -> int:
        """How many workers are warm now, from GET /ready (0 while not ready)."""
        return int(self._ready_body().get("warm", 0))

    def wait_ready(self, timeout: float = 600) -> float:
        """Wait for /ready to answer 200; the seconds from the process start to then."""
        limit = time.monotonic() + timeout
        while time.monotonic() < limit:
            if self.process.poll() is not None:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"byoa-skills serve ended early:\n{tail}")
            if self.ready()[0]:
                return time.perf_counter() - self.started
            time.sleep(0.05)
        raise RuntimeError(f"byoa-skills serve was not ready after {timeout:.0f} s")

    def workers(self) -> list[int]:
        """Worker pids (empty while not ready)."""
        return self.ready()[1]

    def stop(self) -> int:
        """SIGTERM (drain), then SIGKILL after 60 s; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()

    async def call(self, session: aiohttp.ClientSession, body: bytes) -> Timed:
        """POST one ``audio.transcribe`` call (``body`` is its JSON); raises on a refusal."""
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        began = time.perf_counter()
        async with session.post(
            f"{self.url}/v1/skills/audio.transcribe", data=body, headers=headers
        ) as response:
            answer = await response.json(content_type=None)
        waited = time.perf_counter() - began
        if response.status != 200 or not answer.get("ok"):
            raise RuntimeError(f"call refused: {response.status} {answer}")
        header = response.headers.get("Server-Timing", "")
        timing = parse_server_timing(header)
        return Timed(
            waited,
            timing.get("queue", 0.0),
            timing.get("infer", 0.0),
            server_timing_window(header),
            timing,
        )


def start_engine(
    home: Path,
    model: str,
    *,
    workers: int,
    threads: int = 1,
    device: str = "cpu",
    log_name: str = "serve.log",
    extra: tuple[str, ...] = (),
) -> EngineProcess:
    """Start ``byoa-skills serve`` on ``model`` with ``BYOA_SKILLS_HOME=home`` and a fresh
    token; returns at once (see :meth:`EngineProcess.wait_ready`)."""
    args = [
        "--model",
        model,
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--device",
        device,
        "--log-level",
        "warning",
        *extra,
    ]
    return EngineProcess.start(home, args, log_name=log_name)


def grant_request(
    origin: str, manifest: dict[str, Any], skills: list[str], hours: float = 1.0
) -> dict[str, Any]:
    """The body of ``POST /v1/grants`` allowing ``origin`` (declaring ``manifest``) the
    ``skills`` for ``hours``, within 1 USD a session."""
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + hours * 3600))
    grant = {
        "byoa": "0.1-draft",
        "skills": skills,
        "budget": {"perSession": "1 USD"},
        "expiresAt": expires,
    }
    return {"origin": origin, "manifest": manifest, "grant": grant}


def json_body(body: Any) -> bytes:
    """The JSON bytes of a call's body."""
    return json.dumps(body).encode()


async def post_transcription(
    session: aiohttp.ClientSession,
    engine: EngineProcess,
    data: bytes,
    filename: str,
    content_type: str,
    model: str = "whisper-1",
) -> tuple[int, Any]:
    """Send a recording to the engine's ``/v1/audio/transcriptions`` in English:
    ``(status, JSON body)``."""
    form = aiohttp.FormData()
    form.add_field("file", data, filename=filename, content_type=content_type)
    form.add_field("model", model)
    form.add_field("language", "en")
    headers = {"Authorization": f"Bearer {engine.token}"}
    async with session.post(
        f"{engine.url}/v1/audio/transcriptions", data=form, headers=headers
    ) as response:
        return response.status, await response.json(content_type=None)
