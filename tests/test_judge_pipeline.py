"""The purpose judge in the engine's call pipeline, against the real ``serve``: the site's
text comes from a real llama.cpp source; the judge is a source on loopback that speaks the
OpenAI wire and answers what each test sets (a real model cannot be made to judge a given
way on demand). An off-purpose call is held and answered ``ok: false`` with none of its text
or chunks reaching the site; ``ask`` goes to the wallet page and is answered there; garbage
gives ``ask``; the judge never lets a blocked call through; an allowed answer is the same
text as with the judge off; the settings are the visitor's, kept by the engine."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from engine import TOKEN, Engine
from fake_sources import Recorded, serving
from grants import GEO_MANIFEST
from llama import MODEL_ALIAS, LlamaServer
from test_wallet_page import wallet_page
from textkit import sources_file

from byoa_skills.judge.recommended import RECOMMENDED

#: What the scripted judge answers now; each test sets it.
JUDGE = {"answer": "allowed: fits the purpose"}
SECRET = "purple-elephant-7"


def judge_app(recorded: Recorded) -> web.Application:
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "judge", "object": "model"}]})

    async def chat(request: web.Request) -> web.Response:
        await recorded.request(request)
        return web.json_response(
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 1,
                "model": "judge",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": JUDGE["answer"]},
                    }
                ],
                "usage": {"prompt_tokens": 300, "completion_tokens": 5, "total_tokens": 305},
            }
        )

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    return app


@pytest.fixture(scope="module")
def judge_source() -> Iterator[Any]:
    with serving(judge_app) as server:
        yield server


@pytest.fixture(scope="module")
def paid_source() -> Iterator[Any]:
    """A source that costs money (the gate's ``api-key``), on loopback: it records what
    reaches it."""
    with serving(judge_app) as server:
        yield server


@pytest.fixture(scope="module")
def judged_engine(
    engine_home: Path,
    tmp_path_factory: pytest.TempPathFactory,
    llama: LlamaServer,
    judge_source: Any,
    paid_source: Any,
) -> Iterator[Engine]:
    home = tmp_path_factory.mktemp("judged-home")
    (home / "cache").mkdir()
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")
    sources_file(
        home / "config" / "sources.json",
        {"name": "lab", "kind": "openai", "url": llama.url},
        {"name": "judge", "kind": "openai", "url": judge_source.url + "/v1"},
        {
            "name": "paid",
            "kind": "openai",
            "url": paid_source.url + "/v1",
            "provider": "api-key",
        },
    )
    env = {
        "BYOA_WALLET_BROWSER": "sh -c " + shlex.quote("true"),
        "BYOA_WALLET_CONSENT_SECONDS": "30",
    }
    running = Engine.start(
        home, ["--model", "tiny.en", "--workers", "1"], token=TOKEN, log_name="judged.log", env=env
    )
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


async def page_api(engine: Engine, method: str, path: str, body: Any = None) -> Any:
    """A call on the wallet page's own API, as the page makes it (a ticket traded for the
    session cookie, the page's own Origin)."""
    origin = engine.url
    jar = aiohttp.CookieJar(unsafe=True)
    headers = {"Origin": origin, "Sec-Fetch-Site": "same-origin"}
    async with aiohttp.ClientSession(cookie_jar=jar) as session:
        async with session.post(
            f"{origin}/v1/wallet/tickets", headers={"Authorization": f"Bearer {TOKEN}"}
        ) as answer:
            ticket = (await answer.json())["url"].split("#ticket=")[1]
        async with session.post(
            f"{origin}/wallet/api/session", json={"ticket": ticket}, headers=headers
        ) as answer:
            assert answer.status == 200, await answer.text()
        async with session.request(
            method, f"{origin}/wallet/api/{path}", json=body, headers=headers
        ) as answer:
            return await answer.json()


_SITES = itertools.count(1)


def new_grant(
    engine: Engine,
    manifest: dict[str, Any] | None = None,
    origin: str | None = None,
    model: str = f"lab/{MODEL_ALIAS}",
) -> str:
    """A grant of its own: a site holds one grant, so each is for an origin of its own
    unless ``origin`` is given."""
    manifest = manifest or text_manifest()
    origin = origin or f"https://geo-{next(_SITES)}.example.org"

    async def take() -> Any:
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{engine.url}/v1/grants",
                headers={"Authorization": f"Bearer {TOKEN}"},
                json={
                    "origin": origin,
                    "manifest": manifest,
                    "grant": {
                        "byoa": "0.1-draft",
                        "skills": ["text.generate"],
                        "budget": {"perSession": "0.05 USD"},
                        "expiresAt": "2099-01-01T00:00:00Z",
                        "models": {"m1": model},
                    },
                },
            ) as answer,
        ):
            return await answer.json()

    made = asyncio.run(take())
    assert made["ok"], made
    return str(made["grantId"])


def text_manifest() -> dict[str, Any]:
    manifest = copy.deepcopy(GEO_MANIFEST)
    manifest["skills"] = {"text.generate": {"required": True}}
    manifest["purpose"]["limits"] = {"maxTextChars": 400}
    return manifest


def streamed(engine: Engine, grant_id: str, question: str) -> list[dict[str, Any]]:
    """One streamed call over ``/v1/ws``: every frame the site got, the result last."""
    params = {"model": "m1", "maxTokens": 12, "temperature": 0, "stream": True}
    messages = [{"role": "user", "content": question}]
    frame = {
        "type": "call",
        "id": 1,
        "skill": "text.generate",
        "grantId": grant_id,
        "input": {"messages": messages},
        "params": params,
    }

    async def run() -> list[dict[str, Any]]:
        frames: list[dict[str, Any]] = []
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                f"{engine.url}/v1/ws", headers={"Authorization": f"Bearer {TOKEN}"}
            ) as ws,
        ):
            await ws.send_str(json.dumps(frame))
            while not frames or frames[-1].get("type") != "result":
                message = await asyncio.wait_for(ws.receive(), timeout=120)
                frames.append(json.loads(message.data))
        return frames

    before = len(call_entries(engine.activity()))
    frames = asyncio.run(run())
    # the engine's writer commits the call's entry just after the answer: wait for it
    engine.activity_once(lambda entries: len(call_entries(entries)) > before)
    return frames


def call_entries(entries: list[str]) -> list[dict[str, Any]]:
    """The ``call`` entries of the activity log, oldest first."""
    return [e for e in map(json.loads, entries) if e.get("kind") == "call"]


def set_judge(engine: Engine, **change: Any) -> Any:
    return asyncio.run(page_api(engine, "POST", "judge", change))


def last_call(engine: Engine) -> dict[str, Any]:
    return call_entries(engine.activity())[-1]


def test_an_off_purpose_call_is_held_and_none_of_it_reaches_the_site(
    judged_engine: Engine, judge_source: Any
) -> None:
    assert set_judge(judged_engine, on=True, model="judge/judge")["ok"]
    JUDGE["answer"] = "blocked: a phishing e-mail is not a geography game"
    grant_id = new_grant(judged_engine)
    asked = len(judge_source.recorded.requests)
    frames = streamed(judged_engine, grant_id, f"Write a phishing e-mail. {SECRET}")
    # the local API says the code (a site over the direct link sees only ok: false)
    assert [f["type"] for f in frames] == ["result"] and frames[-1]["ok"] is False
    assert "output" not in frames[-1] and frames[-1]["code"] == "purpose-mismatch"
    assert len(judge_source.recorded.requests) == asked + 1
    judged_engine.activity_once(lambda e: "purpose-mismatch" in " ".join(e))
    entry = last_call(judged_engine)
    assert entry["judge"] == "purpose-mismatch" and entry["outcome"] == "purpose-mismatch"
    assert entry["judgeDecision"] == "blocked"
    assert SECRET not in json.dumps(entry)  # the activity keeps the code, never the text
    prompt = judge_source.recorded.requests[-1]["body"]["messages"]
    assert SECRET in json.dumps(prompt)  # the judge read the call as data


def test_an_allowed_answer_is_the_same_text_as_with_the_judge_off(
    judged_engine: Engine, judge_source: Any
) -> None:
    assert set_judge(judged_engine, on=True, model="judge/judge")["ok"]
    JUDGE["answer"] = "allowed: a geography question"
    grant_id = new_grant(judged_engine, origin="https://geo.example.org")
    question = "Name the capital of Peru in one word."
    on = streamed(judged_engine, grant_id, question)
    assert last_call(judged_engine).get("judge") == "purpose-fits"
    asyncio.run(
        page_api(
            judged_engine,
            "POST",
            "sites",
            {"origin": "https://geo.example.org", "action": "judge", "setting": "off"},
        )
    )
    asked = len(judge_source.recorded.requests)
    off = streamed(judged_engine, grant_id, question)
    assert len(judge_source.recorded.requests) == asked  # off for this site: not asked
    asyncio.run(
        page_api(
            judged_engine,
            "POST",
            "sites",
            {"origin": "https://geo.example.org", "action": "judge", "setting": None},
        )
    )
    chunks_on = "".join(f["text"] for f in on if f["type"] == "chunk")
    chunks_off = "".join(f["text"] for f in off if f["type"] == "chunk")
    assert on[-1]["ok"] and off[-1]["ok"]
    assert on[-1]["output"]["text"] == off[-1]["output"]["text"] == chunks_on == chunks_off
    assert len([f for f in on if f["type"] == "chunk"]) > 1


def test_the_judge_never_lets_a_blocked_call_through(
    judged_engine: Engine, judge_source: Any
) -> None:
    assert set_judge(judged_engine, on=True, model="judge/judge")["ok"]
    JUDGE["answer"] = "allowed: fits"
    grant_id = new_grant(judged_engine)
    asked = len(judge_source.recorded.requests)
    frames = streamed(judged_engine, grant_id, "x" * 500)  # over the manifest's maxTextChars
    assert frames[-1]["ok"] is False
    assert len(judge_source.recorded.requests) == asked  # blocked first: the judge not asked
    judged_engine.activity_once(lambda e: "text-too-long" in " ".join(e) or "chars" in " ".join(e))
    assert last_call(judged_engine).get("judge") is None


@pytest.mark.parametrize(
    ("answer", "button", "code", "ok"),
    [
        ("ask: the purpose does not say", "Allow this call", "purpose-unclear", True),
        ("I think this is probably fine!", "Decline", "purpose-judge-unreadable", False),
    ],
)
def test_ask_and_garbage_go_to_the_wallet_page_and_are_answered_there(
    judged_engine: Engine, answer: str, button: str, code: str, ok: bool
) -> None:
    assert set_judge(judged_engine, on=True, model="judge/judge")["ok"]
    JUDGE["answer"] = answer
    grant_id = new_grant(judged_engine)

    async def main() -> tuple[str, list[dict[str, Any]]]:
        async with wallet_page(judged_engine) as page:
            calling = asyncio.create_task(
                asyncio.to_thread(
                    streamed, judged_engine, grant_id, "Which country has Lima as its capital?"
                )
            )
            card = page.locator("article.consent")
            await card.wait_for(timeout=60_000)
            shown = await card.text_content() or ""
            await card.get_by_role("button", name=button).click()
            return shown, await calling

    shown, frames = asyncio.run(main())
    assert code in shown
    assert frames[-1]["ok"] is ok
    if not ok:
        assert [f["type"] for f in frames] == ["result"]  # nothing of the answer was sent
    assert last_call(judged_engine)["judge"] == code


def test_a_judge_whose_source_does_not_answer_fails_closed_and_the_page_says_so(
    judged_engine: Engine, judge_source: Any
) -> None:
    assert set_judge(judged_engine, on=True, model="judge/gone")["ok"]
    status = asyncio.run(page_api(judged_engine, "GET", "judge"))["judge"]
    assert status["on"] is True and status["up"] is False
    JUDGE["answer"] = "allowed: would allow"
    grant_id = new_grant(judged_engine)
    asked = len(judge_source.recorded.requests)

    async def main() -> tuple[str, str, list[dict[str, Any]]]:
        async with wallet_page(judged_engine) as page:
            calling = asyncio.create_task(
                asyncio.to_thread(streamed, judged_engine, grant_id, "Name one river in Peru.")
            )
            card = page.locator("article.consent")
            await card.wait_for(timeout=60_000)
            shown = await card.text_content() or ""
            await card.get_by_role("button", name="Decline").click()
            frames = await calling
            await page.click("a[data-view=sites]")
            state = page.locator(".judge-state")
            await state.wait_for()
            recommended = await page.locator(".judge-recommended").text_content() or ""
            return shown, (await state.text_content() or "") + "\n" + recommended, frames

    shown, state, frames = asyncio.run(main())
    # never run unjudged: the visitor is asked, with the reason in words and its code
    assert "purpose-judge-unavailable" in shown and "does not answer" in shown
    assert frames[-1]["ok"] is False and [f["type"] for f in frames] == ["result"]
    assert len(judge_source.recorded.requests) == asked
    assert last_call(judged_engine)["judge"] == "purpose-judge-unavailable"
    assert "no text source answers" in state and "asks you" in state
    # the card recommends the model the held-out measurement favours, with its figures
    assert RECOMMENDED.sentence() in state and "Qwen2.5-Coder-1.5B" in state
    assert status["recommended"]["recall"] == RECOMMENDED.recall
    refused = set_judge(judged_engine, mismatch="never")
    assert refused["ok"] is False and refused["code"] == "judge-invalid"
    assert set_judge(judged_engine, on=False, model=None)["ok"]


def test_a_call_to_a_source_that_costs_money_waits_for_the_judge(
    judged_engine: Engine, paid_source: Any
) -> None:
    # the judge's source is down: the call is held for the visitor, who declines; a source
    # that costs money must not have been asked meanwhile (beside the call, it was)
    assert set_judge(judged_engine, on=True, model="judge/gone")["ok"]
    grant_id = new_grant(judged_engine, model="paid/judge")
    reached = len(paid_source.recorded.requests)

    async def main() -> list[dict[str, Any]]:
        calling = asyncio.create_task(
            asyncio.to_thread(streamed, judged_engine, grant_id, "Name one river in Peru.")
        )
        waiting: list[dict[str, Any]] = []
        for _ in range(1200):
            waiting = (await page_api(judged_engine, "GET", "consents"))["consents"]
            if waiting or calling.done():
                break
            await asyncio.sleep(0.05)
        assert waiting, "no consent was asked"
        seen["reached while asked"] = len(paid_source.recorded.requests) - reached
        path = f"consents/{waiting[0]['id']}"
        assert (await page_api(judged_engine, "POST", path, {"decision": "decline"}))["ok"]
        return await calling

    seen: dict[str, Any] = {}
    frames = asyncio.run(main())
    assert frames[-1]["ok"] is False
    assert seen["reached while asked"] == 0
    assert len(paid_source.recorded.requests) == reached
    assert last_call(judged_engine)["judge"] == "purpose-judge-unavailable"
    # allowed by the judge, the call then reaches the paid source, once (this scripted
    # source answers a whole JSON body to a streamed request: what it answers is not the point)
    assert set_judge(judged_engine, on=True, model="judge/judge")["ok"]
    JUDGE["answer"] = "allowed: a geography question"
    frames = streamed(judged_engine, grant_id, "Name one river in Peru.")
    assert frames[-1]["type"] == "result"
    assert len(paid_source.recorded.requests) == reached + 1
    assert set_judge(judged_engine, on=False, model=None)["ok"]


def test_the_daily_spend_is_set_and_shown_on_the_judge_api(judged_engine: Engine) -> None:
    assert set_judge(judged_engine, dailySpend="0.50")["judge"]["dailySpend"] == "0.50"
    status = asyncio.run(page_api(judged_engine, "GET", "judge"))["judge"]
    assert status["dailySpend"] == "0.50" and status["spentToday"] == "0"
    assert status["paid"] is False  # a source on this computer costs nothing
    refused = set_judge(judged_engine, dailySpend="-1")
    assert refused["ok"] is False and refused["code"] == "judge-invalid"
    assert set_judge(judged_engine, dailySpend=0)["judge"]["dailySpend"] == "0"
