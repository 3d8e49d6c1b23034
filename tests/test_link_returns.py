"""A decide-on-my-own link's return after a restart, on a real ``serve`` and the reference
site: the return brings back the grant the site held (same id, same expiry: the visitor's
expiry holds across returns), and never a grant the visitor ended."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
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


def fresh_home(engine_home: Path, tmp_path: Path) -> Path:
    """A wallet home of its own that shares the tests' downloaded models."""
    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")
    return home


def started(home: Path, log_name: str) -> Engine:
    """A ``serve`` on ``home`` with the smallest model."""
    return start_engine(home, "--model", "tiny.en", "--workers", "1", log_name=log_name)


def link_ends(engine: Engine) -> list[str]:
    """The outcomes of the links' activity entries, oldest first."""
    entries = [json.loads(text) for text in engine.activity()]
    return [e["outcome"] for e in entries if e.get("kind") == "link"]


def test_a_return_after_a_restart_brings_back_the_same_grant_and_its_expiry(
    engine_home: Path, tmp_path: Path
) -> None:
    home = fresh_home(engine_home, tmp_path)

    async def body(demo: SiteDemo) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        _, link = demo.new_code("127.0.0.1")
        first = started(home, "a.log")
        try:
            await asyncio.to_thread(first.wait_ready)
            seen["taken"] = await api(first, "POST", "/v1/links",
                                      {"link": link, "decision": "decide-on-my-own"})  # fmt: skip
        finally:
            await asyncio.to_thread(first.stop)
        await until(lambda: not demo.connections, "the wallet to go away")
        second = started(home, "b.log")
        try:
            await asyncio.to_thread(second.wait_ready)
            await until(lambda: len(demo.hellos) == 2, "the wallet to come back")
        finally:
            await asyncio.to_thread(second.stop)
        seen["hellos"] = demo.hellos
        return seen

    seen = with_site(body)
    taken, hellos = seen["taken"], seen["hellos"]
    assert taken["ok"] and taken["state"] == "connected", taken
    assert hellos[1]["pairing"], hellos[1]
    assert hellos[1]["grant"]["expiresAt"] == hellos[0]["grant"]["expiresAt"], (
        "the return got a fresh expiry, not the one the visitor's grant had"
    )


def test_a_grant_the_visitor_ended_ends_the_pairing(engine_home: Path, tmp_path: Path) -> None:
    home = fresh_home(engine_home, tmp_path)

    async def body(demo: SiteDemo) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        code, link = demo.new_code("127.0.0.1")
        first = started(home, "a.log")
        try:
            await asyncio.to_thread(first.wait_ready)
            taken = await api(first, "POST", "/v1/links",
                              {"link": link, "decision": "decide-on-my-own"})  # fmt: skip
            assert taken["ok"], taken
            connection = demo.connection(code)
            assert connection is not None
            seen["released"] = await api(first, "DELETE", f"/v1/grants/{taken['grantId']}")
            await until(lambda: connection.said_bye, "the bye of the ended grant")
            await until(lambda: "grant-ended" in link_ends(first), "the link's end")
        finally:
            await asyncio.to_thread(first.stop)
        seen["pairings"] = PairingStore(WalletDatabase(home / "data" / "wallet.sqlite3")).all()
        return seen

    seen = with_site(body)
    assert seen["released"]["ok"] is True
    assert seen["pairings"] == {}, "the pairing of a grant the visitor ended was kept"


def test_a_grant_ended_while_no_engine_runs_is_not_brought_back_by_a_return(
    engine_home: Path, tmp_path: Path
) -> None:
    home = fresh_home(engine_home, tmp_path)

    async def body(demo: SiteDemo) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        _, link = demo.new_code("127.0.0.1")
        first = started(home, "a.log")
        try:
            await asyncio.to_thread(first.wait_ready)
            taken = await api(first, "POST", "/v1/links",
                              {"link": link, "decision": "decide-on-my-own"})  # fmt: skip
            assert taken["ok"], taken
        finally:
            await asyncio.to_thread(first.stop)
        before = len(link_ends(first))
        origin = str(taken["origin"])
        seen["block"] = await asyncio.to_thread(offline_sites, home, "block", origin)
        seen["resume"] = await asyncio.to_thread(offline_sites, home, "resume", origin)
        second = started(home, "b.log")
        try:
            await asyncio.to_thread(second.wait_ready)
            await until(lambda: len(demo.hellos) == 2 or len(link_ends(second)) > before,
                        "the return, or its refusal")  # fmt: skip
            seen["ends"] = link_ends(second)[before:]
        finally:
            await asyncio.to_thread(second.stop)
        seen["hellos"] = len(demo.hellos)
        seen["pairings"] = PairingStore(WalletDatabase(home / "data" / "wallet.sqlite3")).all()
        return seen

    seen = with_site(body)
    assert seen["block"].returncode == 0 and seen["resume"].returncode == 0, seen["block"].stderr
    assert seen["hellos"] == 1, "the wallet came back with a grant the visitor had ended"
    assert seen["ends"] == ["grant-ended"], seen["ends"]
    assert seen["pairings"] == {}, "the pairing of an ended grant was kept"


def offline_sites(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``byoa-skills sites ARGS`` while no engine runs (nothing answers on its port): the
    terminal changes the store of ``home``."""
    return subprocess.run(
        [sys.executable, "-m", "byoa_skills", "sites", *args, "--port", str(free_port()),
         "--token", TOKEN],
        capture_output=True, text=True, env={**os.environ, "BYOA_SKILLS_HOME": str(home)},
    )  # fmt: skip
