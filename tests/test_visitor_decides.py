"""The visitor decides, against the real ``serve``, the reference site's text mode and two real
text sources (llama.cpp with the bundled GGUF, served twice under two makers' names): the
consent lists the models by company and Allow waits for the ticks; the hello lists the codes;
a call by code is answered by exactly that model; a limit narrowed on the Sites view reaches
the site in a ``grant`` frame and binds the next call; a wider one is refused; the extension
gets the grant as it now is, and the choices outlive a restart; a required text skill with no
text source gets no consent on any way in.

``BYOA_WALLET_SCREENSHOTS=DIR`` writes the consent with models and limits and a site's grant
after a change to DIR (``docs/wallet`` holds the ones shown in the docs).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine import TOKEN, Engine, free_port
from grants import GEO_MANIFEST
from llama import LlamaServer, start_llama
from sitekit import until, with_site
from test_wallet_page import api, axe_findings, shot, site_card, wallet_page
from textkit import sources_file

from byoa_skills.byoag import RegistrationStore
from byoa_skills.byoag.keys import PairwiseKeys
from byoa_skills.byoag.registrations import Registration
from byoa_skills.byoag.scope import RegistrationCalls
from byoa_skills.demos.site.demo import SiteDemo
from byoa_skills.demos.site.manifest import MANIFESTS
from byoa_skills.runtimes.text import SourceStore, TextRuntime
from byoa_skills.skills import SkillEngine
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim.shim import WalletShim

#: The same weights under two names: the consent groups them as two makers' models.
LLAMA_NAME, QWEN_NAME = "smollm2-as-llama", "smollm2-as-qwen"
TEXT_MANIFEST = MANIFESTS["text"]


@pytest.fixture(scope="module")
def makers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LlamaServer, LlamaServer]]:
    logs = tmp_path_factory.mktemp("makers")
    first = start_llama(logs / "llama.log", LLAMA_NAME)
    try:
        second = start_llama(logs / "qwen.log", QWEN_NAME)
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


def engine_with_sources(engine_home: Path, home: Path, *sources: dict[str, Any]) -> Engine:
    """A ``serve`` on ``tiny.en`` with these text sources, its consents waiting 30 s."""
    if not (home / "cache").exists():
        (home / "cache").mkdir(parents=True)
        (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")
    sources_file(home / "config" / "sources.json", *sources)
    env = {
        "BYOA_WALLET_BROWSER": "true",
        "BYOA_WALLET_CONSENT_SECONDS": "30",
        "BYOA_WALLET_RECONNECT_SCHEDULE": "0.2,0.5,1",
    }
    running = Engine.start(
        home, ["--model", "tiny.en", "--workers", "1"], token=TOKEN, log_name="decides.log", env=env
    )
    running.wait_ready()
    return running


@pytest.fixture(scope="module")
def decides_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("decides-home")


@pytest.fixture(scope="module")
def two_sources(makers: tuple[LlamaServer, LlamaServer]) -> list[dict[str, Any]]:
    first, second = makers
    return [
        {"name": "lab-a", "kind": "openai", "url": first.url},
        {"name": "lab-b", "kind": "openai", "url": second.url},
    ]


def entries(engine: Engine, kind: str) -> list[dict[str, Any]]:
    return [e for e in map(json.loads, engine.activity()) if e.get("kind") == kind]


async def next_call_entry(engine: Engine, before: int) -> dict[str, Any]:
    """The activity entry of the call after the ``before`` calls already recorded (the
    engine's writer commits an entry just after its answer)."""
    await until(lambda: len(entries(engine, "call")) > before, "the call's activity entry")
    return entries(engine, "call")[before]


def test_ticks_limits_and_every_change_reach_the_site(
    engine_home: Path, decides_home: Path, two_sources: list[dict[str, Any]]
) -> None:
    wallet = engine_with_sources(engine_home, decides_home, *two_sources)
    seen: dict[str, Any] = {}

    async def body(demo: SiteDemo) -> None:
        async with wallet_page(wallet) as page:
            code, link = demo.new_code("127.0.0.1")
            taking = asyncio.create_task(
                api(wallet, "POST", "/v1/links", {"link": link, "decision": "ask"})
            )
            card = page.locator("article.consent")
            await card.wait_for()
            models = card.locator("fieldset.models")
            seen["companies"] = await models.locator("h4.company").all_text_contents()
            boxes = models.locator("input[type=checkbox]")
            seen["preticked"] = [
                await boxes.nth(i).is_checked() for i in range(await boxes.count())
            ]
            allow = card.get_by_role("button", name="Allow", exact=True)
            qwen = models.locator(f'input[data-ref="lab-b/{QWEN_NAME}"]')
            await qwen.uncheck()
            seen["allow with one"] = await allow.is_enabled()
            seen["status with one"] = await models.locator(".models-status").text_content()
            await qwen.check()
            seen["allow with two"] = await allow.is_enabled()
            await card.locator("details.limits-chooser summary").click()
            await card.locator('input[data-limit="maxAnswerTokens"]').fill("48")
            await shot(page, "consent-models")
            seen["axe consent"] = await axe_findings(page)
            await allow.click()
            status, taken = await taking
            assert status == 200 and taken["ok"], taken
            origin, grant_id = taken["origin"], taken["grantId"]
            seen["grant id"] = grant_id
            connection = demo.connection(code)
            assert connection is not None
            seen["hello"] = connection.grants[0]

            question = "Name one colour."
            for name in ("m2", "m1", "m3"):
                before = len(entries(wallet, "call"))
                params = {"model": name, "maxTokens": 8}
                seen[name + " answer"] = await demo.generate(code, question, params)
                entry = await next_call_entry(wallet, before)
                seen[name + " model"] = entry.get("model")
                seen[name + " outcome"] = entry["outcome"]

            site = await site_card(page, origin)
            changer = site.locator("details.grant-changer")
            await changer.locator("summary").click()
            await changer.locator('input[data-limit="maxCallsPerMinute"]').fill("100")
            await changer.get_by_role("button", name="Save").click()
            problem = changer.locator(".choice-problem")
            await problem.wait_for()
            seen["wider"] = await problem.text_content()
            seen["grants told after wider"] = len(connection.grants)
            await changer.locator('input[data-limit="maxCallsPerMinute"]').fill("1")
            await changer.get_by_role("button", name="Save").click()
            await until(lambda: len(connection.grants) >= 2, "a grant frame")
            seen["told"] = connection.grants[-1]
            site = await site_card(page, origin)
            await site.locator("details.grant-changer summary").click()
            await shot(page, "grant-changed")
            seen["axe sites"] = await axe_findings(page)
            # one call a minute: of two calls in a row, one at least is over the limit
            # (however long ago the calls before the change were)
            seen["after change"] = []
            for _ in range(2):
                before = len(entries(wallet, "call"))
                params = {"model": "m1", "maxTokens": 8}
                text, _ = await demo.generate(code, question, params)
                outcome = (await next_call_entry(wallet, before))["outcome"]
                seen["after change"].append((text is not None, outcome))

            # the site requires both models: unticking one is refused, and changes nothing
            changer = site.locator("details.grant-changer")
            await changer.locator('input[data-code="m1"]').uncheck()
            await changer.get_by_role("button", name="Save").click()
            problem = changer.locator(".choice-problem", has_text="too-few-models")
            await problem.wait_for()
            seen["untick"] = await problem.text_content()
            seen["grants told after untick"] = len(connection.grants)

            site = await site_card(page, origin)
            await site.get_by_role("button", name="Pause").click()
            await until(lambda: len(connection.grants) >= 3, "the grant frame of a pause")
            seen["paused"] = connection.grants[-1]
            site = await site_card(page, origin)
            await site.get_by_role("button", name="Resume").click()
            await until(lambda: len(connection.grants) >= 4, "the grant frame of a resume")
            seen["resumed"] = connection.grants[-1]
            # the end brought to 3 s from now: the wallet says bye when it comes
            _, seen["sooner"] = await api(
                wallet,
                "POST",
                "/v1/sites/limits",
                {"origin": origin, "choices": {"expiresInMinutes": 0.05}},
            )
            await until(lambda: connection.said_bye, "bye at the grant's end", seconds=20)
            links = lambda: [e.get("outcome") for e in entries(wallet, "link")]  # noqa: E731
            await until(lambda: "grant-ended" in links(), "the link's end")

    try:
        with_site(body, mode="text")
    finally:
        wallet.stop()
    assert seen["companies"] == ["Alibaba", "Meta"], seen
    assert seen["preticked"] == [True, True]  # the manifest prefers both names
    assert seen["allow with one"] is False and "1 more" in (seen["status with one"] or "")
    assert seen["allow with two"] is True
    assert seen["axe consent"] == [] and seen["axe sites"] == []
    hello = seen["hello"]
    assert hello["models"] == ["m1", "m2"] and hello["limits"]["maxAnswerTokens"] == 48
    assert QWEN_NAME not in json.dumps(hello) and LLAMA_NAME not in json.dumps(hello)
    assert seen["m2 answer"][0] and seen["m2 model"] == f"lab-a/{LLAMA_NAME}"
    assert seen["m1 answer"][0] and seen["m1 model"] == f"lab-b/{QWEN_NAME}"
    assert seen["m3 answer"][0] is None and seen["m3 outcome"] == "model-not-granted"
    assert "limit-wider" in seen["wider"] and seen["grants told after wider"] == 1
    assert seen["told"]["limits"]["maxCallsPerMinute"] == 1
    assert (False, "rate-exceeded") in seen["after change"], seen["after change"]
    assert all(answered == (outcome == "ok") for answered, outcome in seen["after change"])
    assert "too-few-models" in (seen["untick"] or "") and seen["grants told after untick"] == 2
    assert seen["paused"]["models"] == ["m1", "m2"]
    assert seen["paused"]["paused"] is True and "paused" not in seen["resumed"]
    assert seen["sooner"]["ok"] is True


def test_the_extension_gets_the_grant_as_it_now_is_and_the_choices_outlive_a_restart(
    engine_home: Path, tmp_path: Path, two_sources: list[dict[str, Any]]
) -> None:
    home = tmp_path / "home"
    wallet = engine_with_sources(engine_home, home, *two_sources)
    origin = "https://text.example.org"
    seen: dict[str, Any] = {}

    def narrow(*options: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "byoa_skills",
                "sites",
                "limits",
                origin,
                *options,
                "--port",
                str(wallet.port),
                "--token",
                TOKEN,
            ],
            capture_output=True,
            text=True,
        )

    async def main() -> str:
        async with wallet_page(wallet) as page:
            asking = asyncio.create_task(
                api(
                    wallet,
                    "POST",
                    "/v1/extension/request",
                    {"origin": origin, "manifest": TEXT_MANIFEST, "userActivation": True},
                )
            )
            card = page.locator("article.consent")
            await card.wait_for()
            await card.get_by_role("button", name="Allow", exact=True).click()
            _, answer = await asking
        seen["request"] = answer["grant"]
        return str(answer["grant"]["grantId"])

    def call(grant_id: str, model: str) -> dict[str, Any]:
        body = {
            "origin": origin,
            "grantId": grant_id,
            "skill": "text.generate",
            "input": {"messages": [{"role": "user", "content": "Hi"}]},
            "params": {"model": model, "maxTokens": 4},
        }
        return asyncio.run(api(wallet, "POST", "/v1/extension/call", body))[1]

    try:
        grant_id = asyncio.run(main())
        seen["untick"] = narrow("--max-calls-per-minute", "4", "--models", "m2")
        seen["cli"] = narrow("--max-calls-per-minute", "4", "--max-text-chars", "1000")
        seen["call"] = call(grant_id, "m2")
    finally:
        wallet.stop()
    wallet = engine_with_sources(engine_home, home, *two_sources)
    try:
        seen["kept"] = json.loads(wallet.get(f"/v1/grants/{grant_id}")[1])
        seen["call after restart"] = call(grant_id, "m2")
        asyncio.run(api(wallet, "DELETE", f"/v1/grants/{grant_id}"))
        seen["after release"] = call(grant_id, "m2")
    finally:
        wallet.stop()
    assert seen["request"]["models"] == ["m1", "m2"]
    assert QWEN_NAME not in json.dumps(seen["request"])
    cli = seen["cli"]
    assert cli.returncode == 0 and "maxCallsPerMinute 4" in cli.stdout, (cli.stdout, cli.stderr)
    assert seen["call"]["ok"] is True
    assert seen["call"]["grant"]["limits"]["maxCallsPerMinute"] == 4
    # the site requires both models: unticking one is refused, and nothing changes
    untick = seen["untick"]
    assert untick.returncode == 1 and "too-few-models" in untick.stderr, untick.stderr
    assert seen["call"]["grant"]["models"] == ["m1", "m2"]
    kept = seen["kept"]
    assert kept["limits"]["maxCallsPerMinute"] == 4 and kept["limits"]["maxTextChars"] == 1000
    assert kept["models"] == ["m1", "m2"]
    assert seen["call after restart"]["ok"] is True
    assert seen["after release"] == {"ok": False}


def test_the_cli_refuses_a_wider_limit_with_its_code(
    engine_home: Path, tmp_path: Path, two_sources: list[dict[str, Any]]
) -> None:
    wallet = engine_with_sources(engine_home, tmp_path / "home", *two_sources)
    origin = "https://text.example.org"
    manifest = TEXT_MANIFEST
    try:
        status, made = asyncio.run(
            api(
                wallet,
                "POST",
                "/v1/grants",
                {
                    "origin": origin,
                    "manifest": manifest,
                    "grant": {
                        "byoa": "0.1-draft",
                        "skills": ["text.generate"],
                        "budget": {"perSession": "0.05 USD"},
                        "expiresAt": "2099-01-01T00:00:00Z",
                        "models": {"m1": f"lab-a/{LLAMA_NAME}"},
                    },
                },
            )
        )
        assert status == 200, made
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "byoa_skills",
                "sites",
                "limits",
                origin,
                "--max-calls-per-minute",
                "21",
                "--port",
                str(wallet.port),
                "--token",
                TOKEN,
            ],
            capture_output=True,
            text=True,
        )
        _, live = asyncio.run(api(wallet, "GET", f"/v1/grants/{made['grantId']}"))
    finally:
        wallet.stop()
    assert cli.returncode == 1 and "limit-wider" in cli.stderr, cli.stderr
    assert live["limits"]["maxCallsPerMinute"] == 20  # the manifest's, unchanged


def test_a_required_text_skill_with_no_text_source_gets_no_consent_anywhere(
    engine_home: Path, tmp_path: Path
) -> None:
    dead = {"name": "lab-a", "kind": "openai", "url": f"http://127.0.0.1:{free_port()}/v1"}
    wallet = engine_with_sources(engine_home, tmp_path / "home", dead)
    seen: dict[str, Any] = {}

    async def body(demo: SiteDemo) -> None:
        async with wallet_page(wallet) as page:
            _, link = demo.new_code("127.0.0.1")
            _, seen["link"] = await api(
                wallet, "POST", "/v1/links", {"link": link, "decision": "ask"}
            )
            _, seen["request"] = await api(
                wallet,
                "POST",
                "/v1/extension/request",
                {
                    "origin": "https://text.example.org",
                    "manifest": TEXT_MANIFEST,
                    "userActivation": True,
                },
            )
            seen["consents"] = await page.locator("article.consent").count()
            seen["connections"] = len(demo.connections)
            # a manifest that only recommends text: its consent, without text
            asking = asyncio.create_task(
                api(
                    wallet,
                    "POST",
                    "/v1/extension/request",
                    {
                        "origin": "https://geo.example.org",
                        "manifest": GEO_MANIFEST,
                        "userActivation": True,
                    },
                )
            )
            card = page.locator("article.consent")
            await card.wait_for()
            seen["recommended skills"] = await card.locator("dd ul li").all_text_contents()
            seen["recommended models"] = await card.locator("fieldset.models").count()
            await card.get_by_role("button", name="Allow", exact=True).click()
            _, seen["recommended grant"] = await asking

    try:
        with_site(body, mode="text")
    finally:
        wallet.stop()
    assert seen["link"]["ok"] is False and seen["link"]["code"] == "no-fitting-model"
    assert seen["request"] == {"grant": None}
    assert seen["consents"] == 0 and seen["connections"] == 0
    outcomes = [
        e["outcome"]
        for e in map(json.loads, wallet.activity())
        if e.get("kind") in ("link", "request")
    ]
    assert outcomes[:2] == ["no-fitting-model", "no-fitting-model"], outcomes
    assert all("text.generate" not in skill for skill in seen["recommended skills"])
    assert seen["recommended models"] == 0
    assert seen["recommended grant"]["grant"]["skills"] == ["audio.transcribe"]

    async def platform_call() -> Any:
        database = WalletDatabase(tmp_path / "byoag.sqlite3")
        text = TextRuntime(SourceStore(sources_file(tmp_path / "dead.json", dead)))
        shim = WalletShim(SkillEngine(None, text), SiteStore(database), ActivityLog(database))
        store = RegistrationStore(tmp_path / "byoag")
        store.save(
            Registration(
                platform="platform.example",
                issuer="https://platform.example",
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
        calls = RegistrationCalls(shim, store)
        try:
            messages = {"messages": [{"role": "user", "content": "Hi"}]}
            result = await calls.call("platform.example", "text.generate", messages)
        finally:
            await text.close()
        return result, shim.grants.all()

    result, grants = asyncio.run(platform_call())
    assert result.ok is False and result.code == "no-fitting-model" and grants == []
