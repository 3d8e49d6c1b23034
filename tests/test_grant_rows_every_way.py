"""Issue 35's rows on the ways in no other test reached: a paired platform (BYOAg) under the
visitor's narrowed limit after a restart and a renewal, its one grant per site (a page at its
origin included) and its ticked model; "decide on my own" turned on again by hand; a
Sites-view change that keeps the consent's expiry; a link's and a return's kept model no
longer offered. The page's and the platform's run in-process on a shim over a store of their
own (a restart is a new shim on the same store); the link's and the return's on a real
``serve``. The other ways in of each row are in the table of ``docs/consent.md``."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from engine import Engine
from fake_sources import RunningServer, ollama_app, serving
from sitekit import until, with_site
from test_consent_scope import visitor
from test_models_stay_the_visitors import MANIFEST, ORIGIN, consented
from test_models_stay_the_visitors import wallet as text_wallet
from test_visitor_decides import engine_with_sources
from test_wallet_page import api
from textkit import sources_file

from byoa_skills.byoag.keys import PairwiseKeys
from byoa_skills.byoag.registrations import Registration, RegistrationStore
from byoa_skills.byoag.scope import RegistrationCalls, registration_manifest
from byoa_skills.consent.site_changes import SiteChanges
from byoa_skills.demos.site.demo import SiteDemo
from byoa_skills.directlink.check import check_link
from byoa_skills.directlink.client import link_origin
from byoa_skills.extension.requests import PageRequests
from byoa_skills.runtimes.text import SourceStore, TextRuntime
from byoa_skills.skills import SkillEngine
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.clock import now_ms
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import SiteStore
from byoa_skills.store.visitor_choices import KeptChoices
from byoa_skills.wallet_shim.shim import WalletShim
from byoa_skills.wallet_shim.visitor_choices import VisitorChoices

PLATFORM = "https://platform.example"
MESSAGES = {"messages": [{"role": "user", "content": "hello there"}]}


@pytest.fixture(scope="module")
def ollama() -> Iterator[RunningServer]:
    with serving(ollama_app) as server:
        yield server


class Wallet:
    """A wallet's store in ``folder``, a platform paired to it for text, and its text sources
    (``a``, ``b``... at ``urls``): :meth:`started` is the engine's start (again, after a
    restart)."""

    def __init__(self, folder: Path, *urls: str) -> None:
        self.registrations = RegistrationStore(folder / "byoag")
        self.registrations.save(
            Registration(
                platform="platform.example",
                issuer=PLATFORM,
                registration_id="r1",
                agent_id="a1",
                scope=("text.generate",),
                mode="code",
                jkt="j1",
                paired_at="2026-11-30T00:00:00.000Z",
                access_token="t",
            ),
            PairwiseKeys.new(),
        )
        named = zip("ab", urls, strict=False)
        sources = [{"name": name, "kind": "ollama", "url": url} for name, url in named]
        self.sources = sources_file(folder / "sources.json", *sources, default="a/echo")
        self.database = WalletDatabase(folder / "wallet.sqlite3")

    def started(self) -> RegistrationCalls:
        engine = SkillEngine(None, text=TextRuntime(SourceStore(self.sources)))
        shim = WalletShim(engine, SiteStore(self.database), ActivityLog(self.database))
        return RegistrationCalls(shim, self.registrations)

    async def stopped(self, calls: RegistrationCalls) -> None:
        assert calls.shim.engine.text is not None
        await calls.shim.engine.text.close()
        self.database.flush()
        self.database.close()


async def answered(calls: RegistrationCalls, count: int) -> list[bool]:
    """Whether each of ``count`` text calls of the platform was answered."""
    results = [
        await calls.call("platform.example", "text.generate", MESSAGES) for _ in range(count)
    ]
    return [result.ok for result in results]


def newest(calls: RegistrationCalls) -> Any:
    """The platform's newest live grant, None when it holds none."""
    grants = calls.shim.grants.of_origin(PLATFORM)
    return max(grants, key=lambda grant: grant.created_ms) if grants else None


def rate(grant: Any) -> Any:
    """The calls a minute in force for a live grant (None: no such limit)."""
    return grant.summary()["limits"].get("maxCallsPerMinute")


def test_a_platform_narrowed_by_the_visitor_stays_narrowed_after_a_restart_and_a_renewal(
    tmp_path: Path, ollama: RunningServer
) -> None:
    wallet = Wallet(tmp_path, ollama.url)
    seen: dict[str, Any] = {}

    async def before_restart() -> None:
        calls = wallet.started()
        seen["first"] = await answered(calls, 1)
        SiteChanges(calls.shim).limits(PLATFORM, VisitorChoices(limits={"maxCallsPerMinute": 2}))
        await wallet.stopped(calls)

    async def after_restart() -> None:
        calls = wallet.started()  # the engine's next start
        seen["after restart"] = await answered(calls, 5)
        seen["held"] = newest(calls)
        for grant in calls.shim.grants.of_origin(PLATFORM):  # its end: the next call renews
            calls.shim.release_grant(grant.id)
        seen["renewed"] = await answered(calls, 5)
        seen["fresh"] = newest(calls)
        await wallet.stopped(calls)

    asyncio.run(before_restart())
    asyncio.run(after_restart())
    held, fresh = seen["held"], seen["fresh"]
    assert seen["first"] == [True]
    assert seen["after restart"].count(True) <= 1, "the narrowed rate did not hold"
    assert rate(held) == 2, held.summary()
    assert fresh is not None and fresh.id != held.id
    assert rate(fresh) == 2, "the renewal lost the narrowed limit"
    assert seen["renewed"].count(True) == 2, seen["renewed"]


def test_a_platform_that_asks_again_after_a_restart_gets_its_live_grant_back(
    tmp_path: Path, ollama: RunningServer
) -> None:
    wallet = Wallet(tmp_path, ollama.url)
    seen: dict[str, Any] = {}

    async def before_restart() -> None:
        calls = wallet.started()
        seen["first answer"] = await answered(calls, 1)
        [seen["first"]] = calls.shim.grants.of_origin(PLATFORM)
        await wallet.stopped(calls)

    async def after_restart() -> None:
        calls = wallet.started()
        seen["again"] = await answered(calls, 3)
        seen["held"] = [grant.id for grant in calls.shim.grants.of_origin(PLATFORM)]
        seen["counted"] = calls.shim.grants.get(seen["first"].id)
        await wallet.stopped(calls)

    asyncio.run(before_restart())
    asyncio.run(after_restart())
    first, counted = seen["first"], seen["counted"]
    assert seen["first answer"] == [True] and seen["again"] == [True] * 3
    assert seen["held"] == [first.id], "a second grant for one platform"
    assert counted is not None and counted.calls == 4


def test_a_page_at_a_paired_platforms_origin_gets_the_platforms_grant_as_narrowed(
    tmp_path: Path, ollama: RunningServer
) -> None:
    wallet = Wallet(tmp_path, ollama.url)
    seen: dict[str, Any] = {}

    async def main() -> None:
        calls = wallet.started()
        seen["platform"] = await answered(calls, 1)
        SiteChanges(calls.shim).limits(PLATFORM, VisitorChoices(limits={"maxCallsPerMinute": 2}))
        [held] = calls.shim.grants.of_origin(PLATFORM)
        seen["held"] = held.id
        manifest = registration_manifest(wallet.registrations.get("platform.example"))
        page = PageRequests(calls.shim, None)  # no consent can be shown: none is needed
        seen["page"] = await page.request(PLATFORM, manifest, True)
        seen["grants"] = [grant.id for grant in calls.shim.grants.of_origin(PLATFORM)]
        await wallet.stopped(calls)

    asyncio.run(main())
    page = seen["page"]
    assert seen["platform"] == [True]
    assert page is not None and page["grantId"] == seen["held"], "a second grant for one site"
    assert page["limits"]["maxCallsPerMinute"] == 2, page
    assert seen["grants"] == [seen["held"]]


def test_a_platforms_model_no_longer_offered_is_never_replaced_by_another(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}
    sources = {"a": serving(ollama_app), "b": serving(ollama_app)}
    running = {name: source.__enter__() for name, source in sources.items()}
    wallet = Wallet(tmp_path, running["a"].url, running["b"].url)

    async def main() -> None:
        calls = wallet.started()
        seen["first"] = await answered(calls, 1)
        [gone] = [name for name, source in running.items() if source.recorded.requests]
        sources.pop(gone).__exit__(None, None, None)  # the source that answered stops
        [other] = sources
        seen["other"], seen["asked before"] = other, len(running[other].recorded.requests)
        for grant in calls.shim.grants.of_origin(PLATFORM):  # the next call renews the grant
            calls.shim.release_grant(grant.id)
        seen["after"] = await calls.call("platform.example", "text.generate", MESSAGES)
        seen["grants"] = [grant.models for grant in calls.shim.grants.of_origin(PLATFORM)]
        await wallet.stopped(calls)

    try:
        asyncio.run(main())
    finally:
        for source in sources.values():
            source.__exit__(None, None, None)
    other_asked = len(running[seen["other"]].recorded.requests) - seen["asked before"]
    after = seen["after"]
    assert seen["first"] == [True]
    assert (after.ok, after.code) == (False, "model-not-ticked"), (after.ok, after.code)
    assert seen["grants"] == [], seen["grants"]
    assert other_asked == 0, "another model than the one ticked answered the platform"


def test_decide_on_my_own_turned_on_again_by_hand_gives_no_grant_without_a_click(
    tmp_path: Path,
) -> None:
    seen: dict[str, Any] = {}
    entries: list[dict[str, Any]] = []
    with serving(ollama_app) as source:
        shim, requests, desk = text_wallet(tmp_path, source.url, source.url)
        shim.watch_activity(entries.append)

        async def main() -> None:
            grant = await consented(requests, desk, ["a/echo:latest"])  # decide on my own
            changes = SiteChanges(shim)
            await changes.change("decide-on-my-own", ORIGIN, False)  # the page's switch
            shim.release_grant(grant["grantId"])
            await changes.change("decide-on-my-own", ORIGIN, True)  # on again, by hand
            seen["no click"] = await requests.request(ORIGIN, MANIFEST, False)
            assert shim.engine.text is not None
            await shim.engine.text.close()

        asyncio.run(main())
    assert seen["no click"] is None, "a grant with no click for a site that held none"
    assert shim.grants.all() == []
    outcomes = [e["outcome"] for e in entries if e.get("kind") == "request"]
    assert outcomes[-1] == "asks-for-more", outcomes


def expires_ms(grant: dict[str, Any]) -> int:
    when = datetime.fromisoformat(str(grant["expiresAt"]).replace("Z", "+00:00"))
    return int(when.timestamp() * 1000)


async def on_my_own(requests: Any, desk: Any, choices: dict[str, Any]) -> Any:
    """The site's first grant, after the visitor answered its consent "decide on my own" with
    ``choices``."""
    asking = asyncio.create_task(requests.request(ORIGIN, MANIFEST, True))
    for _ in range(200):  # a wait for the consent to be shown
        if desk.waiting():
            break
        await asyncio.sleep(0.05)
    desk.answer(desk.waiting()[0].id, "decide-on-my-own", choices)
    return await asking


def test_a_change_on_the_sites_view_keeps_the_consents_expiry_for_the_next_grant(
    tmp_path: Path,
) -> None:
    seen: dict[str, Any] = {}
    with serving(ollama_app) as source:
        shim, requests, desk = text_wallet(tmp_path, source.url, source.url)

        async def main() -> None:
            first = await on_my_own(
                requests, desk, {"models": ["a/echo:latest"], "expiresInMinutes": 30}
            )
            SiteChanges(shim).limits(ORIGIN, VisitorChoices(limits={"maxCallsPerMinute": 3}))
            shim.release_grant(first["grantId"])
            seen["asked"] = now_ms()
            seen["next"] = await requests.request(ORIGIN, MANIFEST, False)
            assert shim.engine.text is not None
            await shim.engine.text.close()

        asyncio.run(main())
    following = seen["next"]
    assert following is not None
    assert expires_ms(following) <= seen["asked"] + 31 * 60_000, (
        "the next grant got the default day, not the 30 minutes the visitor chose"
    )
    assert following["limits"]["maxCallsPerMinute"] == 3, following


def test_a_change_is_kept_before_it_returns_however_busy_the_store(tmp_path: Path) -> None:
    kept: dict[str, Any] = {}
    with serving(ollama_app) as source:
        shim, requests, desk = text_wallet(tmp_path, source.url, source.url)

        async def main() -> None:
            first = await on_my_own(requests, desk, {"models": ["a/echo:latest"]})
            origin = shim.grants.get(first["grantId"]).origin
            # the store's writer is busy (a loaded machine): the change waits its turn
            shim.sites.database.submit(lambda db: time.sleep(0.3))
            SiteChanges(shim).limits(ORIGIN, VisitorChoices(limits={"maxCallsPerMinute": 3}))
            kept.update(KeptChoices(shim.sites.database).get(origin) or {})
            assert shim.engine.text is not None
            await shim.engine.text.close()

        asyncio.run(main())
    # what the site's next grant reads right after the change is the change
    assert kept["limits"]["maxCallsPerMinute"] == 3, kept


def ollamas(running: dict[str, RunningServer]) -> list[dict[str, Any]]:
    """The text sources of a sources file, one for each running fake Ollama, by name."""
    return [{"name": name, "kind": "ollama", "url": server.url} for name, server in running.items()]


async def link_ticked(engine: Engine, link: str, models: list[str]) -> dict[str, Any]:
    """The engine's answer to ``link`` handed over with ``ask``, its consent answered "decide on
    my own" with ``models`` ticked."""
    origin = link_origin(check_link(link, dev_local=True))
    async with visitor(engine) as page:
        taking = asyncio.create_task(
            api(engine, "POST", "/v1/links", {"link": link, "decision": "ask"})
        )
        consent = await page.next_consent(origin)
        await page.answer(consent, "decide-on-my-own", {"models": models})
        return (await taking)[1]


def test_a_links_kept_model_no_longer_offered_is_never_replaced(
    engine_home: Path, tmp_path: Path
) -> None:
    """On a real ``serve``: a link's consent ticks a model of source ``a``; ``a`` stops; the
    site's next link, decided in the terminal, gets no grant rather than another model."""
    seen: dict[str, Any] = {}
    sources = {"a": serving(ollama_app), "b": serving(ollama_app)}
    running = {name: source.__enter__() for name, source in sources.items()}
    wallet = engine_with_sources(engine_home, tmp_path / "home", *ollamas(running))

    async def body(demo: SiteDemo) -> None:
        _, link = demo.new_code("127.0.0.1")
        seen["first"] = await link_ticked(wallet, link, ["a/echo:latest"])
        sources.pop("a").__exit__(None, None, None)  # the ticked source stops
        await api(wallet, "DELETE", f"/v1/grants/{seen['first']['grantId']}")
        _, second = demo.new_code("127.0.0.1")
        _, seen["next"] = await api(
            wallet, "POST", "/v1/links", {"link": second, "decision": "decide-on-my-own"}
        )

    try:
        with_site(body, manifest=MANIFEST)
    finally:
        wallet.stop()
        for source in sources.values():
            source.__exit__(None, None, None)
    first, following = seen["first"], seen["next"]
    assert first["ok"] and first["state"] == "connected", first
    assert (following["ok"], following.get("code")) == (False, "model-not-ticked"), following


def test_a_return_whose_kept_model_is_no_longer_offered_gets_no_other_model(
    engine_home: Path, tmp_path: Path
) -> None:
    """On a real ``serve``: a decide-on-my-own link ticks a model of source ``a``; the engine
    stops, ``a`` stops; at the next start the link's return gets no other model: it is
    refused, or it comes back to the grant it held (its tick, which answers nothing while
    ``a`` is away), and the other source is never asked."""
    seen: dict[str, Any] = {}
    sources = {"a": serving(ollama_app), "b": serving(ollama_app)}
    running = {name: source.__enter__() for name, source in sources.items()}
    home = tmp_path / "home"

    def link_ends(engine: Engine) -> list[str]:
        entries = [json.loads(text) for text in engine.activity()]
        return [e["outcome"] for e in entries if e.get("kind") == "link"]

    async def body(demo: SiteDemo) -> None:
        _, link = demo.new_code("127.0.0.1")
        first = await asyncio.to_thread(engine_with_sources, engine_home, home, *ollamas(running))
        try:
            seen["first"] = await link_ticked(first, link, ["a/echo:latest"])
        finally:
            await asyncio.to_thread(first.stop)
        sources.pop("a").__exit__(None, None, None)  # the ticked source stops
        before = len(link_ends(first))
        second = await asyncio.to_thread(engine_with_sources, engine_home, home, *ollamas(running))
        try:
            await until(
                lambda: len(demo.hellos) == 2 or len(link_ends(second)) > before,
                "the return, or its refusal",
            )
            for connection in demo.connections:  # back: the site calls with its model
                seen["call"] = await connection.call(
                    1, "text.generate", MESSAGES, {"model": "m1"}, timeout=20
                )
        finally:
            await asyncio.to_thread(second.stop)
        seen["b asked"] = len(running["b"].recorded.requests)

    try:
        with_site(body, manifest=MANIFEST)
    finally:
        for source in sources.values():
            source.__exit__(None, None, None)
    assert seen["first"]["ok"], seen["first"]
    assert seen["b asked"] == 0, "another model than the one ticked answered the site"
    assert seen.get("call") is None, seen.get("call")
