"""Taking links in the engine: the checks before any contact, at most 4 at once, the address
the wallet connects to, pairings kept and refused."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import socket
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from grants import GEO_MANIFEST

from byoa_skills.consent import decision as decision_module
from byoa_skills.directlink.addresses import AddressRefused, PinnedResolver, resolve_public
from byoa_skills.directlink.intake import LinkIntake
from byoa_skills.skills import SkillEngine
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.link_pairings import PairingStore, RecentCodes
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim.shim import WalletShim


def make_link(port: int, manifest: dict[str, Any] = GEO_MANIFEST) -> str:
    text = base64.urlsafe_b64encode(json.dumps(manifest).encode()).decode().rstrip("=")
    endpoint = f"ws%3A%2F%2Flocalhost%3A{port}%2Fbyoa%2Fws"
    session = secrets.token_urlsafe(24)
    return (
        f"bringyourownagent://connect?v=0.1&endpoint={endpoint}&manifest={text}&session={session}"
    )


@pytest.fixture(autouse=True)
def speech_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A link's speech skill counts as one this engine serves (these tests are of taking
    links, not of a model: no model runs); with no text source, text is left out."""

    async def every_skill_but_text(engine: SkillEngine, manifest: dict[str, Any]) -> set[str]:
        return set(manifest["skills"]) - {"text.generate"}

    monkeypatch.setattr(decision_module, "fitting_skills", every_skill_but_text)


def intake_in(folder: Path, **options: Any) -> LinkIntake:
    # links are taken before any call: no model runs
    database = WalletDatabase(folder / "wallet.sqlite3")
    shim = WalletShim(SkillEngine(None), SiteStore(database), ActivityLog(database))
    pairings, recent = PairingStore(database), RecentCodes(database)
    return LinkIntake(shim, pairings=pairings, recent=recent, dev_local=True, **options)


def activity_in(folder: Path) -> list[dict[str, Any]]:
    database = WalletDatabase(folder / "wallet.sqlite3")
    return ActivityLog(database).read()


async def silent_site() -> tuple[web.AppRunner, int, list[Any]]:
    """A WebSocket endpoint that takes connections and says nothing."""
    sockets: list[Any] = []

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        sockets.append(ws)
        async for _ in ws:
            pass
        return ws

    app = web.Application()
    app.router.add_get("/byoa/ws", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, runner.addresses[0][1], sockets


def test_at_most_four_links_at_once(tmp_path: Path) -> None:
    async def main() -> tuple[dict[str, Any], int]:
        sites = [await silent_site() for _ in range(5)]  # a site holds one grant: five sites
        intake = intake_in(tmp_path)
        pending = [
            asyncio.create_task(intake.take(make_link(port), "allow")) for _, port, _ in sites[:4]
        ]
        for _ in range(400):
            if sum(len(sockets) for _, _, sockets in sites) == 4:
                break
            await asyncio.sleep(0.01)
        fifth = await intake.take(make_link(sites[4][1]), "allow")
        for task in pending:
            task.cancel()
        await intake.close()
        for runner, _, _ in sites:
            await runner.cleanup()
        return fifth, sum(len(sockets) for _, _, sockets in sites)

    fifth, connected = asyncio.run(main())
    assert (fifth["ok"], fifth["code"]) == (False, "too-many-links")
    assert connected == 4


@pytest.mark.parametrize("state", ["blocked", "paused"])
def test_a_blocked_or_paused_site_is_not_contacted(tmp_path: Path, state: str) -> None:
    async def main() -> tuple[dict[str, Any], int]:
        runner, port, sockets = await silent_site()
        intake = intake_in(tmp_path)
        origin = f"http://localhost:{port}"
        (intake.shim.sites.block if state == "blocked" else intake.shim.sites.pause)(origin)
        answer = await intake.take(make_link(port), "allow")
        await asyncio.sleep(0.2)
        await runner.cleanup()
        intake.shim.activity.database.flush()
        return answer, len(sockets)

    answer, connected = asyncio.run(main())
    assert (answer["ok"], answer["code"], connected) == (False, f"site-{state}", 0)
    entries = activity_in(tmp_path)
    assert entries[-1]["outcome"] == f"site-{state}" and entries[-1]["kind"] == "link"


def test_a_refused_link_only_leaves_an_activity_entry(tmp_path: Path) -> None:
    intake = intake_in(tmp_path)
    answer = asyncio.run(intake.take("bringyourownagent://connect?v=0.2", "allow"))
    assert answer["ok"] is False and answer["code"]
    intake.shim.activity.database.flush()
    assert activity_in(tmp_path)[-1]["outcome"] == answer["code"]
    assert PairingStore(WalletDatabase(tmp_path / "wallet.sqlite3")).all() == {}


def test_codes_are_remembered_for_ten_minutes(tmp_path: Path) -> None:
    database = WalletDatabase(tmp_path / "wallet.sqlite3")
    recent = RecentCodes(database)
    assert not recent.seen("a-code")
    assert recent.first_sight("a-code") and recent.seen("a-code")
    assert not recent.first_sight("a-code")
    assert b"a-code" not in database.path.read_bytes() + (  # kept as digests only
        database.path.with_name("wallet.sqlite3-wal").read_bytes()
    )
    stale = RecentCodes(database, memory=0)
    assert stale.first_sight("a-code")


def test_the_wallet_refuses_private_addresses() -> None:
    async def main() -> list[str]:
        outcomes = []
        for host, loopback_ok in (("localhost", False), ("127.0.0.1", False), ("localhost", True)):
            try:
                found = await resolve_public(host, 443, allow_loopback=loopback_ok)
                outcomes.append(found["host"])
            except AddressRefused as refused:
                outcomes.append(refused.code)
        return outcomes

    first, second, third = asyncio.run(main())
    assert first == second == "endpoint-private-address"
    assert third in ("127.0.0.1", "::1")


def test_the_pinned_resolver_answers_only_for_the_checked_name() -> None:
    pinned = PinnedResolver(
        {
            "hostname": "game.example.org",
            "host": "203.0.113.9",
            "port": 443,
            "family": socket.AF_INET,
            "proto": 6,
            "flags": 0,
        }
    )

    async def main() -> tuple[str, str]:
        answer = await pinned.resolve("game.example.org", 443)
        try:
            await pinned.resolve("other.example.org", 443)
            other = "resolved"
        except OSError:
            other = "refused"
        return answer[0]["host"], other

    assert asyncio.run(main()) == ("203.0.113.9", "refused")
