"""A real ``byoa-skills serve`` process for the tests, and clients that speak its API."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

TOKEN = "test-token-0123456789"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Engine:
    """A running ``serve`` subprocess."""

    process: subprocess.Popen[str]
    port: int
    home: Path
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str, token: str | None = TOKEN) -> tuple[int, str]:
        request = urllib.request.Request(self.url + path)
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def workers(self) -> list[int]:
        status, body = self.get("/ready", token=None)
        return json.loads(body)["workers"] if status == 200 else []

    def metric(self, name: str, **labels: str) -> float:
        """The value of one sample in /metrics (0 when absent)."""
        _, text = self.get("/metrics")
        wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            sample, _, label_text = key.partition("{")
            present = ",".join(sorted(label_text.rstrip("}").split(","))) if label_text else ""
            if sample == name and present == wanted:
                return float(value)
        return 0.0

    def wait_ready(self, timeout: float = 600) -> None:
        """Wait for /ready to say 200 (a readiness wait, not a measurement)."""
        limit = time.monotonic() + timeout
        while time.monotonic() < limit:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve ended early:\n{self.log.read_text()[-3000:]}")
            status, _ = self.get("/ready", token=None) if self._listening() else (0, "")
            if status == 200:
                return
            time.sleep(0.2)
        raise RuntimeError("serve did not get ready")

    def _listening(self) -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


def start_engine(home: Path, *args: str, log_name: str = "serve.log") -> Engine:
    """Start ``byoa-skills serve`` with ``args``; return at once (see :meth:`wait_ready`)."""
    port = free_port()
    log = home / log_name
    env = {
        **os.environ, "BYOA_SKILLS_HOME": str(home), "BYOA_SKILLS_TOKEN": TOKEN,
        # the developer switch (ws://localhost sites) and a shorter way back after a drop
        "BYOA_WALLET_DEV_LOCAL": "1", "BYOA_WALLET_RECONNECT_SCHEDULE": "0.2,0.5,1",
    }  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "byoa_skills", "serve", "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        env=env,
        text=True,
    )
    return Engine(process, port, home, log)


async def call_http(
    engine: Engine, skill: str, body: Any, token: str | None = TOKEN, raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:  # fmt: skip
    """POST one call; ``(status, JSON body)``."""
    all_headers = {"Authorization": f"Bearer {token}"} if token else {}
    all_headers.update(headers or {})
    data = raw if raw is not None else json.dumps(body).encode()
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{engine.url}/v1/skills/{skill}", data=data, headers=all_headers) as response,
    ):
        return response.status, await response.json(content_type=None)


async def call_ws(engine: Engine, frames: list[Any], expect: int) -> list[dict[str, Any]]:
    """Send every frame at once on one WebSocket, then collect ``expect`` answer frames."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answers: list[dict[str, Any]] = []
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(f"{engine.url}/v1/ws", headers=headers, max_msg_size=0) as ws,
    ):
        for frame in frames:
            await ws.send_str(frame if isinstance(frame, str) else json.dumps(frame))
        while len(answers) < expect:
            message = await asyncio.wait_for(ws.receive(), timeout=300)
            assert message.type == aiohttp.WSMsgType.TEXT, message
            answers.append(json.loads(message.data))
    return answers
