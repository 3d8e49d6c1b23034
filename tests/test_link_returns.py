"""A decide-on-my-own link's return after a restart, on a real ``serve`` and the reference
site: the return brings back the grant the site held (same id, same expiry: the visitor's
expiry holds across returns, and so do the limits the visitor narrowed it to), and never a
grant the visitor ended."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from engine import TOKEN, Engine, free_port, start_engine
from sitekit import until, with_site

from byoa_skills.demos.site.demo import SiteDemo
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.link_pairings import PairingStore


async def api(engine: Engine, method: str, path: str, body: Any = None) -> dict[str, Any]:
    """One call of the engine's local API with its token; the JSON answer."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, engine.url + path, json=body, headers=headers) as response,
    ):
        return await response.json(content_type=None)


@pytest.fixture
def home(engine_home: Path, tmp_path: Path) -> Path:
    """A wallet home of its own that shares the tests' downloaded models."""
    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")
    return home


@asynccontextmanager
async def running(home: Path, log_name: str) -> AsyncIterator[Engine]:
    """A ``serve`` on ``home`` with the smallest model, ready; stopped at the end."""
    engine = start_engine(home, "--model", "tiny.en", "--workers", "1", log_name=log_name)
    try:
        await asyncio.to_thread(engine.wait_ready)
        yield engine
    finally:
        await asyncio.to_thread(engine.stop)


async def taken_on_my_own(engine: Engine, link: str) -> dict[str, Any]:
    """The engine's answer to ``link`` handed over with "decide on my own"."""
    return await api(engine, "POST", "/v1/links", {"link": link, "decision": "decide-on-my-own"})


def link_ends(engine: Engine) -> list[str]:
    """The outcomes of the links' activity entries, oldest first."""
    entries = [json.loads(text) for text in engine.activity()]
    return [e["outcome"] for e in entries if e.get("kind") == "link"]


def pairings(home: Path) -> dict[str, Any]:
    """The direct links' pairings kept in the store of ``home``."""
    return PairingStore(WalletDatabase(home / "data" / "wallet.sqlite3")).all()


def sites(home: Path, *args: str, port: int | None = None) -> subprocess.CompletedProcess[str]:
    """``byoa-skills sites ARGS`` against the engine on ``port``; without one, while no engine
    runs (nothing answers on its port): the terminal changes the store of ``home``."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "byoa_skills",
            "sites",
            *args,
            "--port",
            str(port or free_port()),
            "--token",
            TOKEN,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "BYOA_SKILLS_HOME": str(home)},
    )


def test_a_return_after_a_restart_brings_back_the_same_grant_and_its_expiry(home: Path) -> None:
    async def body(demo: SiteDemo) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        _, link = demo.new_code("127.0.0.1")
        async with running(home, "a.log") as first:
            seen["taken"] = await taken_on_my_own(first, link)
        await until(lambda: not demo.connections, "the wallet to go away")
        async with running(home, "b.log"):
            await until(lambda: len(demo.hellos) == 2, "the wallet to come back")
        seen["hellos"] = demo.hellos
        return seen

    seen = with_site(body)
    taken, hellos = seen["taken"], seen["hellos"]
    assert taken["ok"] and taken["state"] == "connected", taken
    assert hellos[1]["pairing"], hellos[1]
    assert hellos[1]["grant"]["expiresAt"] == hellos[0]["grant"]["expiresAt"], (
        "the return got a fresh expiry, not the one the visitor's grant had"
    )


def test_a_grant_the_visitor_ended_ends_the_pairing(home: Path) -> None:
    async def body(demo: SiteDemo) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        code, link = demo.new_code("127.0.0.1")
        async with running(home, "a.log") as first:
            taken = await taken_on_my_own(first, link)
            assert taken["ok"], taken
            connection = demo.connection(code)
            assert connection is not None
            seen["released"] = await api(first, "DELETE", f"/v1/grants/{taken['grantId']}")
            await until(lambda: connection.said_bye, "the bye of the ended grant")
            await until(lambda: "grant-ended" in link_ends(first), "the link's end")
        seen["pairings"] = pairings(home)
        return seen

    seen = with_site(body)
    assert seen["released"]["ok"] is True
    assert seen["pairings"] == {}, "the pairing of a grant the visitor ended was kept"


def test_a_grant_ended_while_no_engine_runs_is_not_brought_back_by_a_return(home: Path) -> None:
    async def body(demo: SiteDemo) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        _, link = demo.new_code("127.0.0.1")
        async with running(home, "a.log") as first:
            taken = await taken_on_my_own(first, link)
            assert taken["ok"], taken
        before = len(link_ends(first))
        origin = str(taken["origin"])
        seen["block"] = await asyncio.to_thread(sites, home, "block", origin)
        seen["resume"] = await asyncio.to_thread(sites, home, "resume", origin)
        async with running(home, "b.log") as second:
            await until(
                lambda: len(demo.hellos) == 2 or len(link_ends(second)) > before,
                "the return, or its refusal",
            )
            seen["ends"] = link_ends(second)[before:]
        seen["hellos"] = len(demo.hellos)
        seen["pairings"] = pairings(home)
        return seen

    seen = with_site(body)
    assert seen["block"].returncode == 0 and seen["resume"].returncode == 0, seen["block"].stderr
    assert seen["hellos"] == 1, "the wallet came back with a grant the visitor had ended"
    assert seen["ends"] == ["grant-ended"], seen["ends"]
    assert seen["pairings"] == {}, "the pairing of an ended grant was kept"


def test_a_limit_narrowed_while_no_engine_runs_holds_on_the_return_after_a_restart(
    home: Path,
) -> None:
    async def body(demo: SiteDemo) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        _, link = demo.new_code("127.0.0.1")
        async with running(home, "a.log") as first:
            taken = await taken_on_my_own(first, link)
            assert taken["ok"], taken
        await until(lambda: not demo.connections, "the wallet to go away")
        seen["narrowed"] = await asyncio.to_thread(
            sites, home, "limits", str(taken["origin"]), "--max-calls-per-minute", "2"
        )
        async with running(home, "b.log"):
            await until(lambda: len(demo.hellos) == 2, "the wallet to come back")
        seen["hellos"] = demo.hellos
        return seen

    seen = with_site(body)
    assert seen["narrowed"].returncode == 0, seen["narrowed"].stderr
    returned = seen["hellos"][1]["grant"]
    assert returned["limits"]["maxCallsPerMinute"] == 2, returned


def test_decide_on_my_own_turned_off_ends_the_return_after_a_restart(home: Path) -> None:
    async def body(demo: SiteDemo) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        _, link = demo.new_code("127.0.0.1")
        async with running(home, "a.log") as first:
            taken = await taken_on_my_own(first, link)
            assert taken["ok"], taken
            seen["off"] = await asyncio.to_thread(
                sites, home, "decide-on-my-own", str(taken["origin"]), "off", port=first.port
            )
        await until(lambda: not demo.connections, "the wallet to go away")
        seen["pairings"] = pairings(home)
        async with running(home, "b.log"):
            await asyncio.sleep(3)  # a return comes within a second of the start
        seen["hellos"] = len(demo.hellos)
        return seen

    seen = with_site(body)
    assert seen["off"].returncode == 0, seen["off"].stderr
    assert seen["hellos"] == 1, "the wallet came back to a site it no longer decides for"
    assert seen["pairings"] == {}, "the pairing outlived decide on my own"
