"""The terminal finds its engine: ``serve`` records where it listens in the home it serves,
and ``sites`` (and every command that talks to the engine) finds it there, tells it, and says
what happened; a stale record is said, ``--port`` overrides, and a change that cannot reach a
running engine exits 3 with nothing changed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from engine import TOKEN, Engine, free_port
from sitekit import until, with_site
from speech import SPEECH
from test_direct_link import take_link

from byoa_skills.demos.site.demo import SiteDemo
from byoa_skills.serve.engine_record import (
    EngineRecord,
    locate_engine,
    read_records,
    records_folder,
    write_record,
)
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import SiteStore

NORWAY = (SPEECH / "country-norway.wav").read_bytes()
SITE = "https://gone.example.org"


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``byoa-skills ARGS`` in the home ``home``, with the tests' token."""
    env = {**os.environ, "BYOA_SKILLS_HOME": str(home), "BYOA_SKILLS_TOKEN": TOKEN}
    return subprocess.run(
        [sys.executable, "-m", "byoa_skills", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def dead_pid() -> int:
    """The pid of a process that has ended."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    return int(done.stdout)


def state(home: Path, origin: str) -> str:
    return SiteStore(WalletDatabase(home / "data" / "wallet.sqlite3")).state(origin)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path))
    return tmp_path


def test_the_running_engine_records_where_it_listens(engine: Engine) -> None:
    pid = engine.process.pid
    records = dict(read_records(engine.home / "data" / "engines"))
    path = engine.home / "data" / "engines" / f"{pid}.json"
    assert (records[path].host, records[path].port) == ("127.0.0.1", engine.port)
    assert path.stat().st_mode & 0o077 == 0
    assert json.loads(engine.get("/health")[1])["pid"] == pid


def test_no_record_no_engine(home: Path) -> None:
    found = asyncio.run(locate_engine())
    assert (found.state, found.running, found.url) == ("none", False, None)


def test_a_record_whose_process_is_gone_is_stale_and_removed(home: Path) -> None:
    write_record(EngineRecord("127.0.0.1", free_port(), dead_pid(), ""))
    found = asyncio.run(locate_engine())
    assert found.state == "stale" and "stale" in found.message
    assert not list(records_folder().iterdir())


def test_a_port_that_answers_as_another_program_is_stale(home: Path) -> None:
    async def health(_: web.Request) -> web.Response:
        return web.json_response({"ok": True, "pid": 1})

    async def main() -> Any:
        app = web.Application()
        app.router.add_get("/health", health)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            write_record(EngineRecord.this_process("127.0.0.1", port))
            return await locate_engine()
        finally:
            await runner.cleanup()

    found = asyncio.run(main())
    assert found.state == "stale" and "not the recorded engine" in found.message


def test_a_live_engine_that_does_not_answer_is_unreachable(home: Path) -> None:
    write_record(EngineRecord.this_process("127.0.0.1", free_port()))  # this process: alive
    assert asyncio.run(locate_engine()).state == "unreachable"
    done = cli(home, "sites", "pause", SITE)
    assert done.returncode == 3, done.stderr
    assert "does not answer: nothing changed" in done.stderr
    assert state(home, SITE) == "active"


def test_with_no_engine_the_change_is_saved_and_said(home: Path) -> None:
    done = cli(home, "sites", "pause", SITE)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"paused {SITE}\n"
    assert "no engine running: saved; the site sees it when it next connects" in done.stderr
    assert state(home, SITE) == "paused"

    write_record(EngineRecord("127.0.0.1", free_port(), dead_pid(), ""))
    done = cli(home, "sites", "resume", SITE)
    assert done.returncode == 0, done.stderr
    assert "stale" in done.stderr and "no engine running: saved" in done.stderr
    assert state(home, SITE) == "active"


def test_a_port_given_where_nothing_answers_while_the_engine_runs_elsewhere(
    engine: Engine,
) -> None:
    done = cli(engine.home, "sites", "pause", SITE, "--port", str(free_port()))
    assert done.returncode == 3, done.stderr
    assert f"this home's engine runs at {engine.url}" in done.stderr
    assert state(engine.home, SITE) == "active"


def test_pause_resume_and_forget_without_a_port_reach_the_connected_site(engine: Engine) -> None:
    seen: dict[str, Any] = {}

    async def run(*args: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(cli, engine.home, "sites", *args)

    async def body(demo: SiteDemo) -> None:
        session, link = demo.new_code("127.0.0.1")
        origin = (await take_link(engine, link))["origin"]
        connection = demo.connections[0]
        seen["origin"] = origin
        seen["pause"] = await run("pause", origin)
        await until(lambda: len(connection.grants) >= 2, "the paused grant frame")
        seen["paused grant"] = connection.grants[-1]
        seen["paused call"] = await demo.transcribe(session, NORWAY, "en", timeout=30)
        seen["resume"] = await run("resume", origin)
        await until(lambda: len(connection.grants) >= 3, "the resumed grant frame")
        seen["resumed grant"] = connection.grants[-1]
        seen["resumed call"] = await demo.transcribe(session, NORWAY, "en")
        seen["forget"] = await run("forget", origin)
        await until(lambda: connection.closed, "the link to end")
        seen["bye"] = connection.said_bye
        seen["close"] = connection.ws.close_code

    with_site(body)
    for action in ("pause", "resume", "forget"):
        done = seen[action]
        assert done.returncode == 0, (action, done.stderr)
        assert "told the connected site" in done.stderr, (action, done.stderr)
    assert seen["paused grant"].get("paused") is True
    assert seen["paused call"] is None
    assert "paused" not in seen["resumed grant"]
    assert seen["resumed call"] and "norway" in seen["resumed call"].lower()
    assert seen["bye"] and seen["close"] == 1000
    assert state(engine.home, seen["origin"]) == "active"
