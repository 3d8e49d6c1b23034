"""A paired platform's calls pass only within the registration's scope, through the shim and
the local API, answered by the real engine (text from the Ollama-format server)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from fake_sources import RunningServer, ollama_app, serving
from speech import skill_input
from textkit import sources_file

from byoa_skills.byoag.keys import PairwiseKeys
from byoa_skills.byoag.registrations import Registration, RegistrationStore
from byoa_skills.byoag.scope import RegistrationCalls
from byoa_skills.consent import decision as decision_module
from byoa_skills.runtimes.text import SourceStore, TextRuntime
from byoa_skills.serve.app import build_app
from byoa_skills.serve.metrics import EngineMetrics
from byoa_skills.skills import CallResult, SkillEngine
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim.shim import WalletShim

TOKEN = "scope-test-token"
MESSAGES = {"messages": [{"role": "user", "content": "hello there"}]}


@pytest.fixture(scope="module")
def ollama() -> Iterator[RunningServer]:
    with serving(ollama_app) as server:
        yield server


def calls_in(folder: Path, ollama: RunningServer, scope: tuple[str, ...]) -> RegistrationCalls:
    store = RegistrationStore(folder / "byoag")
    store.save(
        Registration(
            platform="platform.example",
            issuer="https://platform.example",
            registration_id="r1",
            agent_id="a1",
            scope=scope,
            mode="code",
            jkt="j1",
            paired_at="2026-11-30T00:00:00.000Z",
            access_token="t",
        ),
        PairwiseKeys.new(),
    )
    path = sources_file(
        folder / "sources.json",
        {"name": "ollama", "kind": "ollama", "url": ollama.url},
        default="ollama/echo",
    )
    engine = SkillEngine(None, text=TextRuntime(SourceStore(path)))
    database = WalletDatabase(folder / "wallet.sqlite3")
    shim = WalletShim(engine, SiteStore(database), ActivityLog(database))
    return RegistrationCalls(shim, store)


def test_a_skill_in_the_scope_is_answered_through_a_grant(
    tmp_path: Path, ollama: RunningServer
) -> None:
    calls = calls_in(tmp_path, ollama, ("text.generate",))

    async def main() -> list[CallResult]:
        try:
            return [await calls.call("platform.example", "text.generate", MESSAGES) for _ in "ab"]
        finally:
            assert calls.shim.engine.text is not None
            await calls.shim.engine.text.close()

    results = asyncio.run(main())
    assert [r.ok for r in results] == [True, True], results
    assert results[0].output == {"text": "hello there " * 3}
    [grant] = calls.shim.grants.of_origin("https://platform.example")
    assert grant.skills == ["text.generate"]


def test_a_skill_outside_the_scope_is_refused(tmp_path: Path, ollama: RunningServer) -> None:
    calls = calls_in(tmp_path, ollama, ("text.generate",))
    result = asyncio.run(calls.call("platform.example", "audio.transcribe", {}))
    assert (result.ok, result.code) == (False, "outside-registration-scope")
    assert calls.shim.grants.of_origin("https://platform.example") == []


def test_a_platform_without_a_registration_is_refused(
    tmp_path: Path, ollama: RunningServer
) -> None:
    calls = calls_in(tmp_path, ollama, ("text.generate",))
    assert asyncio.run(calls.call("other.example", "text.generate", MESSAGES)).code == (
        "not-registered"
    )
    calls.registrations.remove("platform.example")
    assert asyncio.run(calls.call("platform.example", "text.generate", MESSAGES)).code == (
        "not-registered"
    )


def test_a_blocked_platform_is_refused_like_any_site(tmp_path: Path, ollama: RunningServer) -> None:
    calls = calls_in(tmp_path, ollama, ("text.generate",))
    calls.shim.sites.block("https://platform.example")
    result = asyncio.run(calls.call("platform.example", "text.generate", MESSAGES))
    assert (result.ok, result.code) == (False, "site-blocked")


def test_the_local_api_takes_a_platforms_calls_by_its_registration(
    tmp_path: Path, ollama: RunningServer
) -> None:
    calls = calls_in(tmp_path, ollama, ("text.generate",))
    app = build_app(calls.shim.engine, EngineMetrics(), TOKEN, calls.shim, registrations=calls)

    async def main() -> list[tuple[int, dict[str, Any]]]:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1/skills"
        answers = []
        try:
            async with aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {TOKEN}"}
            ) as session:
                for skill, platform in (
                    ("text.generate", "platform.example"),
                    ("audio.transcribe", "platform.example"),
                    ("text.generate", "other.example"),
                ):
                    body = {"registration": platform, "input": MESSAGES}
                    async with session.post(f"{url}/{skill}", json=body) as response:
                        answers.append((response.status, await response.json()))
        finally:
            await runner.cleanup()
            assert calls.shim.engine.text is not None
            await calls.shim.engine.text.close()
        return answers

    (ok_status, ok), (scope_status, scope), (unknown_status, unknown) = asyncio.run(main())
    assert ok_status == 200 and ok["output"]["text"].startswith("hello there")
    assert (scope_status, scope["code"]) == (403, "outside-registration-scope")
    assert (unknown_status, unknown["code"]) == (404, "not-registered")


def test_a_skill_of_the_scope_not_served_here_is_refused_until_it_is(
    tmp_path: Path, ollama: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No speech runs here: the grant holds the scope's text skill, a speech call is refused
    ``no-fitting-model``; once speech is served, the same grant is widened to it."""
    calls = calls_in(tmp_path, ollama, ("text.generate", "audio.transcribe"))
    served = {"text.generate"}

    async def fitting(engine: SkillEngine, manifest: dict[str, Any]) -> set[str]:
        return set(manifest["skills"]) & served

    monkeypatch.setattr(decision_module, "fitting_skills", fitting)

    async def main() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        try:
            text = await calls.call("platform.example", "text.generate", MESSAGES)
            clip = skill_input("en-hello.wav")
            speech = await calls.call("platform.example", "audio.transcribe", clip)
            [grant] = calls.shim.grants.of_origin("https://platform.example")
            seen["before"] = (text.ok, speech.code, grant.id, grant.skills)
            served.add("audio.transcribe")
            speech = await calls.call("platform.example", "audio.transcribe", clip)
            [grant] = calls.shim.grants.of_origin("https://platform.example")
            seen["after"] = (speech.code, grant.id, grant.skills)
        finally:
            assert calls.shim.engine.text is not None
            await calls.shim.engine.text.close()
        return seen

    seen = asyncio.run(main())
    text_ok, speech_code, grant_id, skills = seen["before"]
    assert (text_ok, speech_code, skills) == (True, "no-fitting-model", ["text.generate"])
    # admitted under the same grant, now with speech (no worker runs here to answer it)
    assert seen["after"] == ("skill-unavailable", grant_id, ["audio.transcribe", "text.generate"])
