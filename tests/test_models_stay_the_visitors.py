"""Models stay the visitor's: a kept tick no longer offered is never replaced by other models
without a consent; unticking below what the site requires is refused with its code; under a
grant with a models block, a call that names no model never reaches the default model.

Two loopback Ollama sources offer the same models; the page's requests go through the
extension's request path and the one grant decision."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
from fake_sources import OPENROUTER_KEY, ollama_app, openrouter_app, serving
from textkit import sources_file

from byoa_skills.consent.desk import ConsentDesk
from byoa_skills.extension.requests import PageRequests
from byoa_skills.runtimes.text import SourceStore, TextRuntime
from byoa_skills.skills import SkillEngine
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim.shim import WalletShim
from byoa_skills.wallet_shim.visitor_choices import ChoiceRefusal, VisitorChoices

ORIGIN = "https://models.example.org"
MANIFEST: dict[str, Any] = {
    "byoa": "0.1-draft",
    "purpose": {"summary": "Answer one question with one model", "limits": {}},
    "skills": {
        "text.generate": {
            "required": True,
            "models": {"count": 1, "required": 1, "why": "The one answer shown on the page"},
        }
    },
    "privacy": "personal",
    "expectedCost": {"perSession": "0 USD"},
}


def wallet(tmp_path: Path, *urls: str) -> tuple[WalletShim, PageRequests, ConsentDesk]:
    sources = [
        {"name": name, "kind": "ollama", "url": url} for name, url in zip("ab", urls, strict=False)
    ]
    path = sources_file(tmp_path / "sources.json", *sources, default="b/echo:latest")
    database = WalletDatabase(tmp_path / "wallet.sqlite3")
    text = TextRuntime(SourceStore(path))
    shim = WalletShim(SkillEngine(None, text=text), SiteStore(database), ActivityLog(database))
    desk = ConsentDesk(seconds=10)
    return shim, PageRequests(shim, desk), desk


async def consented(requests: PageRequests, desk: ConsentDesk, models: list[str]) -> Any:
    asking = asyncio.create_task(requests.request(ORIGIN, MANIFEST, True))
    for _ in range(200):
        if desk.waiting():
            break
        await asyncio.sleep(0.05)
    desk.answer(desk.waiting()[0].id, "decide-on-my-own", {"models": models})
    return await asking


def test_a_kept_tick_no_longer_offered_is_never_replaced_without_a_consent(
    tmp_path: Path,
) -> None:
    seen: dict[str, Any] = {}
    entries: list[dict[str, Any]] = []
    with serving(ollama_app) as other:
        kept_serving = serving(ollama_app)
        kept_source = kept_serving.__enter__()
        shim, requests, desk = wallet(tmp_path, kept_source.url, other.url)
        shim.watch_activity(entries.append)

        async def main() -> None:
            grant = await consented(requests, desk, ["a/echo:latest"])
            seen["first"] = shim.grants.get(grant["grantId"]).models
            shim.release_grant(grant["grantId"])
            kept_serving.__exit__(None, None, None)  # the ticked source stops
            seen["no click"] = await requests.request(ORIGIN, MANIFEST, False)
            asking = asyncio.create_task(requests.request(ORIGIN, MANIFEST, True))
            for _ in range(200):
                if desk.waiting():
                    break
                await asyncio.sleep(0.05)
            seen["consent"] = [c.view.get("models") is not None for c in desk.waiting()]
            for consent in desk.waiting():
                desk.answer(consent.id, "decline")
            seen["clicked"] = await asking
            await shim.engine.text.close()

        asyncio.run(main())
    assert seen["first"] == {"m1": "a/echo:latest"}
    assert seen["no click"] is None, "another model than the one ticked, without a consent"
    outcomes = [e["outcome"] for e in entries if e.get("kind") == "request"]
    assert "model-not-ticked" in outcomes, outcomes
    assert seen["consent"] == [True], "a click shows a consent to tick again"
    assert seen["clicked"] is None
    assert shim.grants.all() == []


def test_unticking_below_required_is_refused(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}
    with serving(ollama_app) as one, serving(ollama_app) as two:
        shim, requests, desk = wallet(tmp_path, one.url, two.url)

        async def main() -> None:
            grant = await consented(requests, desk, ["a/echo:7b"])
            with pytest.raises(ChoiceRefusal) as refused:
                shim.change_grant(grant["grantId"], VisitorChoices(models=()))
            seen["untick"] = refused.value.code
            seen["models after"] = shim.grants.get(grant["grantId"]).models
            await shim.engine.text.close()

        asyncio.run(main())
    assert seen["untick"] == "too-few-models"
    assert seen["models after"] == {"m1": "a/echo:7b"}


def test_under_a_models_block_no_call_reaches_the_default_model(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}
    with serving(ollama_app) as one, serving(ollama_app) as two:
        shim, _, _ = wallet(tmp_path, one.url, two.url)

        async def main() -> None:
            optional = copy.deepcopy(MANIFEST)
            optional["skills"]["text.generate"]["models"]["required"] = 0
            made = shim.create_grant(
                "https://other.example.org",
                optional,
                {
                    "byoa": "0.1-draft",
                    "skills": ["text.generate"],
                    "budget": {"perSession": "0 USD"},
                    "expiresAt": "2099-01-01T00:00:00Z",
                },
            )
            messages = {"messages": [{"role": "user", "content": "hello there"}]}
            result = await shim.call(made["grantId"], "text.generate", messages, {})
            seen["no model"] = (result.ok, result.code)
            await shim.engine.text.close()

        asyncio.run(main())
        seen["asked"] = len(one.recorded.requests) + len(two.recorded.requests)
    assert seen["no model"] == (False, "model-not-granted"), "the default model answered"
    assert seen["asked"] == 0, "a source was asked for an answer"


def test_no_piece_of_a_streamed_answer_from_another_model_reaches_the_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source says another model answered (a silent fallback): the call is refused
    ``model-mismatch`` before its first piece is handed on."""
    monkeypatch.setenv("FAKE_OR_KEY", OPENROUTER_KEY)
    pieces: list[tuple[int, str]] = []
    seen: dict[str, Any] = {}

    async def on_chunk(choice: int, piece: str) -> None:
        pieces.append((choice, piece))

    with serving(openrouter_app) as router:
        path = sources_file(
            tmp_path / "sources.json",
            {
                "name": "r",
                "kind": "openrouter",
                "url": router.url + "/api/v1",
                "keyEnv": "FAKE_OR_KEY",
            },
        )
        database = WalletDatabase(tmp_path / "wallet.sqlite3")
        text = TextRuntime(SourceStore(path))
        shim = WalletShim(SkillEngine(None, text=text), SiteStore(database), ActivityLog(database))

        async def main() -> None:
            messages = {"messages": [{"role": "user", "content": "tell me a long story"}]}
            for model in ("fake/shifty", "fake/echo-1"):
                made = shim.create_grant(
                    ORIGIN,
                    MANIFEST,
                    {
                        "byoa": "0.1-draft",
                        "skills": ["text.generate"],
                        "budget": {"perSession": "0.05 USD"},
                        "expiresAt": "2099-01-01T00:00:00Z",
                        "models": {"m1": f"r/{model}"},
                    },
                )
                result = await shim.call(
                    made["grantId"],
                    "text.generate",
                    messages,
                    {"model": "m1", "stream": True},
                    on_chunk=on_chunk,
                )
                seen[model] = (result.ok, result.code, len(pieces))
            await text.close()

        asyncio.run(main())
    assert seen["fake/shifty"] == (False, "model-mismatch", 0), seen
    ok, _, streamed = seen["fake/echo-1"]
    assert ok and streamed > 0, seen  # the same path streams the model asked for
