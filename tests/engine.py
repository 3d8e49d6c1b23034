"""A real ``byoa-skills serve`` process for the tests, and clients that speak its API."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from byoa_skills.bench.server import EngineProcess, free_port

__all__ = ["TOKEN", "Engine", "call_http", "call_ws", "free_port", "start_engine"]

TOKEN = "test-token-0123456789"


class Engine(EngineProcess):
    """A running ``serve`` subprocess, with readers for its plain GET endpoints."""

    def get(self, path: str, token: str | None = TOKEN) -> tuple[int, str]:
        """GET ``path``: ``(status, body)``, refusals included."""
        request = urllib.request.Request(self.url + path)
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def activity(self) -> list[str]:
        """The activity log's entries (JSON text), oldest first, as committed now."""
        with sqlite3.connect(Path(self.home) / "data" / "wallet.sqlite3") as db:
            return [row[0] for row in db.execute("SELECT entry FROM activity ORDER BY id")]

    def activity_once(self, enough: Callable[[list[str]], bool], seconds: float = 30) -> list[str]:
        """The activity log's entries once ``enough(entries)`` holds, or as they are after
        ``seconds``: the engine's writer thread commits an entry just after its answer."""
        limit = time.monotonic() + seconds
        while not enough(entries := self.activity()) and time.monotonic() < limit:
            time.sleep(0.05)
        return entries

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


def start_engine(home: Path, *args: str, log_name: str = "serve.log") -> Engine:
    """Start ``byoa-skills serve`` with ``args`` and the tests' token; return at once (see
    :meth:`Engine.wait_ready`). A dropped direct link is tried again sooner than by default."""
    env = {"BYOA_WALLET_RECONNECT_SCHEDULE": "0.2,0.5,1"}
    if "--idle-release" not in args:  # the workers stay; tests/test_pool_idle.py lets them go
        args = (*args, "--idle-release", "0")
    return Engine.start(home, args, token=TOKEN, log_name=log_name, env=env)


async def call_http(
    engine: Engine,
    skill: str,
    body: Any,
    token: str | None = TOKEN,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
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
