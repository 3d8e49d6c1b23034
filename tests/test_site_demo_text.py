"""The reference site's text mode, through a real server on loopback and a real WebSocket
client playing the wallet: hello with model codes, the calls to each, grant frames, bye."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from bringyourownagent import validate_manifest
from engine import TOKEN, Engine
from fake_sources import ollama_app, serving
from llama import LlamaServer
from test_site_demo import Site, closed_with, frame, hello, link_parameters, parse, running_site
from textkit import sources_file

from byoa_skills.demos.site import TEXT_MANIFEST, SiteDemo, encode_manifest, start_site
from byoa_skills.demos.site.manifest import decode_manifest
from byoa_skills.directlink.check import check_link
from byoa_skills.wallet_shim.models_block import block_problems

ROOT = Path(__file__).resolve().parent.parent
TEXT_GRANT = {
    "skills": ["text.generate"],
    "expiresAt": "2099-01-01T00:00:00Z",
    "limits": {"maxCallsPerMinute": 20, "maxParallelCalls": 8, "maxTextChars": 2000},
    "models": ["m1", "m2"],
}


def run_text_site(body: Callable[[Site], Awaitable[None]]) -> None:
    """Run ``body`` against a fresh site in text mode on a free loopback port."""

    async def main() -> None:
        async with running_site(mode="text") as site:
            await body(site)

    asyncio.run(main())


async def connect(site: Site, grant: Any = TEXT_GRANT) -> tuple[Any, str, str]:
    """A wallet that came with a fresh code and ``grant``: ``(socket, session, pairing)``."""
    code = await site.code()
    ws = await site.socket()
    await ws.send_str(hello(code["session"], grant=grant))
    welcome = await frame(ws)
    assert welcome["type"] == "welcome"
    return ws, code["session"], welcome["pairing"]


def ask(site: Site, session: str, question: str, **more: Any) -> asyncio.Task[Any]:
    """``POST /byoa/ask`` in the background: the task gives ``(status, body)``."""

    async def post() -> tuple[int, Any]:
        async with site.http.post(
            site.url + "/byoa/ask", params={"session": session}, json={"question": question, **more}
        ) as response:
            return response.status, await response.json()

    return asyncio.create_task(post())


async def view(site: Site, session: str) -> dict[str, Any]:
    async with site.http.get(site.url + "/byoa/grant", params={"session": session}) as answer:
        assert answer.status == 200
        return await answer.json()


async def shown_when(site: Site, session: str, test: Callable[[dict[str, Any]], bool]) -> Any:
    """What ``GET /byoa/grant`` shows once ``test`` holds for it (a frame the wallet sent is
    read by the site in its own time), or after 200 looks."""
    for _ in range(200):
        shown = await view(site, session)
        if test(shown):
            return shown
        await asyncio.sleep(0.01)
    return shown


async def result(ws: Any, call_id: int, text: str | None) -> None:
    """Answer a call: ``ok`` with ``text``, or ``ok: false`` for None."""
    answer: dict[str, Any] = {"type": "result", "id": call_id, "ok": text is not None}
    if text is not None:
        answer["output"] = {"text": text}
    await ws.send_str(json.dumps(answer))


async def grant_frame(ws: Any, **changes: Any) -> None:
    grant = {key: value for key, value in {**TEXT_GRANT, **changes}.items() if value is not None}
    await ws.send_str(json.dumps({"type": "grant", "grant": grant}))


# The manifest and the link


def test_the_text_link_carries_a_models_block_of_two_models_from_different_companies() -> None:
    async def body(site: Site) -> None:
        link = (await site.code())["link"]
        manifest64 = link_parameters(link)["manifest"]
        assert manifest64 == encode_manifest(TEXT_MANIFEST) == site.demo.manifest64
        manifest = decode_manifest(manifest64)
        block = manifest["skills"]["text.generate"]["models"]
        assert (block["count"], block["required"], block["differentCompanies"]) == (2, 2, True)
        assert set(manifest["purpose"]["limits"]) >= {
            "maxTextChars",
            "maxAnswerTokens",
            "maxCallsPerMinute",
        }
        assert validate_manifest(manifest)["ok"] is True
        assert block_problems(manifest) == []
        assert check_link(link, dev_local=True).ok

    run_text_site(body)


# Questions and answers


def test_a_question_goes_to_each_granted_code_and_each_answer_keeps_its_code() -> None:
    async def body(site: Site) -> None:
        ws, session, _ = await connect(site)
        asked = ask(site, session, "Why is the sky blue?")
        calls = [await frame(ws), await frame(ws)]
        by_model = {call["params"]["model"]: call for call in calls}
        assert set(by_model) == {"m1", "m2"}
        for call in calls:
            assert call["type"] == "call" and call["skill"] == "text.generate"
            assert call["input"] == {
                "messages": [{"role": "user", "content": "Why is the sky blue?"}]
            }
            assert call["params"] == {"model": call["params"]["model"], "maxTokens": 64}
        # m2's answer first, and m1 refused: each answer stays with the code it was sent to.
        await result(ws, by_model["m2"]["id"], "Rayleigh scattering.")
        await result(ws, by_model["m1"]["id"], None)
        status, answered = await asked
        assert status == 200
        assert answered == {
            "answers": [
                {"model": "m1", "text": None, "pieces": 0},
                {"model": "m2", "text": "Rayleigh scattering.", "pieces": 0},
            ]
        }

        # The answer's length the page chose goes in params.maxTokens.
        asked = ask(site, session, "Short?", maxTokens=5)
        calls = [await frame(ws), await frame(ws)]
        assert sorted(c["params"]["maxTokens"] for c in calls) == [5, 5]
        for call in calls:
            await result(ws, call["id"], call["params"]["model"] + " says yes")
        assert [a["text"] for a in (await asked)[1]["answers"]] == ["m1 says yes", "m2 says yes"]
        await ws.close()

    run_text_site(body)


def test_a_streamed_question_counts_the_chunk_frames_before_each_result() -> None:
    async def body(site: Site) -> None:
        ws, session, _ = await connect(site)
        asked = ask(site, session, "Count to three", stream=True)
        calls = [await frame(ws), await frame(ws)]
        assert all(c["params"]["stream"] is True for c in calls)
        for call, pieces in zip(calls, (["one ", "two ", "three"], ["1, 2, 3"]), strict=True):
            for piece in pieces:
                await ws.send_str(json.dumps({"type": "chunk", "id": call["id"], "text": piece}))
            await result(ws, call["id"], "".join(pieces))
        answers = {a["model"]: a for a in (await asked)[1]["answers"]}
        first, second = (answers[c["params"]["model"]] for c in calls)
        assert (first["text"], first["pieces"]) == ("one two three", 3)
        assert (second["text"], second["pieces"]) == ("1, 2, 3", 1)
        assert site.demo.connection(session).chunks == {}  # nothing kept after the answer
        await ws.close()

    run_text_site(body)


def test_a_grant_without_models_gets_one_call_naming_none_and_one_without_text_none() -> None:
    async def body(site: Site) -> None:
        ws, session, _ = await connect(site, {**TEXT_GRANT, "models": None})
        asked = ask(site, session, "Hello?")
        call = await frame(ws)
        assert call["params"] == {"maxTokens": 64}
        await result(ws, call["id"], "Hi.")
        assert (await asked)[1] == {"answers": [{"model": None, "text": "Hi.", "pieces": 0}]}
        await ws.close()

        ws, session, _ = await connect(site, {**TEXT_GRANT, "skills": ["audio.transcribe"]})
        assert (await ask(site, session, "Hello?"))[1] == {"answers": []}
        # Nothing was sent: the wallet's next frame from the site is the bye on stopping.
        await site.demo.close()
        assert (await frame(ws))["type"] == "bye"

    run_text_site(body)


def test_the_site_refuses_a_question_it_will_not_send_each_with_its_code() -> None:
    async def body(site: Site) -> None:
        ws, session, _ = await connect(site)
        url = site.url + "/byoa/ask"
        cases: list[tuple[Any, int, str]] = [
            ({"question": ""}, 400, "question-invalid"),
            ({"question": "  "}, 400, "question-invalid"),
            ({}, 400, "question-invalid"),
            ([], 400, "body-invalid"),
            ("Why?", 400, "body-invalid"),
            ({"question": "x" * 2001}, 400, "question-too-long"),
            ({"question": "x", "maxTokens": 0}, 400, "max-tokens-invalid"),
            ({"question": "x", "maxTokens": 257}, 400, "max-tokens-invalid"),
            ({"question": "x", "maxTokens": True}, 400, "max-tokens-invalid"),
            ({"question": "x", "maxTokens": "5"}, 400, "max-tokens-invalid"),
            ({"question": "x", "stream": "yes"}, 400, "stream-invalid"),
        ]
        for sent, status, code in cases:
            async with site.http.post(url, params={"session": session}, json=sent) as answer:
                assert (answer.status, (await answer.json())["error"]) == (status, code), sent
        async with site.http.post(url, params={"session": session}, data="{}") as answer:
            assert (answer.status, (await answer.json())["error"]) == (415, "not-json")
        json_type = {"Content-Type": "application/json"}
        async with site.http.post(
            url, params={"session": session}, data="{", headers=json_type
        ) as answer:
            refusal = await answer.json()
            assert answer.status == 400 and refusal["error"] == "body-invalid"
            assert refusal["message"] == "the body must be a JSON object"
        # 2000 characters is the manifest's maxTextChars: that one is sent.
        asked = ask(site, session, "é" * 2000, maxTokens=256)
        calls = [await frame(ws), await frame(ws)]
        assert [len(c["input"]["messages"][0]["content"]) for c in calls] == [2000, 2000]
        for call in calls:
            await result(ws, call["id"], "ok")
        assert (await asked)[0] == 200
        assert (await ask(site, "no-such-session", "Hello?"))[1] == {"answers": []}
        await ws.close()

    run_text_site(body)


# The grant as the wallet last told it


def test_a_grant_frame_changes_what_the_page_is_shown_and_where_questions_go() -> None:
    async def body(site: Site) -> None:
        assert await view(site, "no-such-session") == {"state": "none", "grant": None}
        ws, session, pairing = await connect(site)
        assert await view(site, session) == {"state": "connected", "grant": TEXT_GRANT}
        assert await view(site, pairing) == {"state": "connected", "grant": TEXT_GRANT}

        # The visitor unticked m1 and narrowed two limits.
        limits = {"maxCallsPerMinute": 5, "maxParallelCalls": 1, "maxTextChars": 100}
        await grant_frame(ws, models=["m2"], limits=limits)
        await shown_when(site, session, lambda v: v["grant"]["models"] == ["m2"])
        shown = await view(site, session)
        assert shown == {
            "state": "connected",
            "grant": {**TEXT_GRANT, "models": ["m2"], "limits": limits},
        }
        asked = ask(site, session, "Only m2?")
        call = await frame(ws)
        assert call["params"]["model"] == "m2"
        await result(ws, call["id"], "Only m2.")
        assert (await asked)[1]["answers"] == [{"model": "m2", "text": "Only m2.", "pieces": 0}]
        connection = site.demo.connection(session)
        assert connection.max_parallel_calls == 1
        assert [g.get("models") for g in connection.grants] == [["m1", "m2"], ["m2"]]

        # maxParallelCalls 1 with both models again: one call at a time, neither refused.
        await grant_frame(ws, limits={"maxParallelCalls": 1})
        await shown_when(site, session, lambda v: v["grant"]["models"] == ["m1", "m2"])
        asked = ask(site, session, "One at a time?")
        first = await frame(ws)
        await result(ws, first["id"], "first")
        second = await frame(ws)
        assert (first["params"]["model"], second["params"]["model"]) == ("m1", "m2")
        await result(ws, second["id"], "second")
        assert [a["text"] for a in (await asked)[1]["answers"]] == ["first", "second"]
        assert connection.calls_refused == 0

        # Paused: the page is told, and nothing is sent; each code has no answer.
        await grant_frame(ws, paused=True)
        await shown_when(site, session, lambda v: v["grant"].get("paused") is True)
        assert (await view(site, session))["grant"]["paused"] is True
        assert (await ask(site, session, "While paused?"))[1]["answers"] == [
            {"model": "m1", "text": None, "pieces": 0},
            {"model": "m2", "text": None, "pieces": 0},
        ]
        # Resumed: a grant frame without paused; the next frame is the next question's call.
        await grant_frame(ws)
        await shown_when(site, session, lambda v: "paused" not in v["grant"])
        asked = ask(site, session, "After the resume?")
        call = await frame(ws)
        assert call["input"]["messages"][0]["content"] == "After the resume?"
        await result(ws, call["id"], "back")
        await result(ws, (await frame(ws))["id"], "back too")
        assert [a["text"] for a in (await asked)[1]["answers"]] == ["back", "back too"]

        # A grant frame that carries no grant object changes nothing.
        await ws.send_str('{"type":"grant","grant":"all of it"}')
        await ws.send_str('{"type":"grant"}')
        await ws.send_str(json.dumps({"type": "grant", "grant": {**TEXT_GRANT, "models": []}}))
        await shown_when(site, session, lambda v: v["grant"]["models"] == [])
        assert len(connection.grants) == 6
        await ws.close()

    run_text_site(body)


def test_bye_ends_the_session_for_the_page_and_a_dropped_socket_leaves_it_away() -> None:
    async def body(site: Site) -> None:
        ws, session, pairing = await connect(site)
        # The socket drops without a bye: away, with the grant last told.
        await grant_frame(ws, models=["m1"])
        await shown_when(site, session, lambda v: v["grant"]["models"] == ["m1"])
        await ws.close()
        await shown_when(site, session, lambda v: v["state"] == "away")
        assert await view(site, session) == {
            "state": "away",
            "grant": {**TEXT_GRANT, "models": ["m1"]},
        }
        assert (await ask(site, session, "Anyone there?"))[1] == {"answers": []}

        # It comes back with its pairing and a new grant: the page's session code finds it.
        ws = await site.socket()
        back = {**TEXT_GRANT, "models": ["m2"]}
        await ws.send_str(hello(None, pairing, grant=back))
        assert (await frame(ws))["type"] == "welcome"
        assert await view(site, session) == {"state": "connected", "grant": back}

        # The wallet says bye: the grant ended, the page is told so, and nothing is asked.
        waiting = ask(site, session, "Still there?")
        call = await frame(ws)
        await ws.send_str('{"type":"bye"}')
        assert (await closed_with(ws))[0] == 1000
        assert (await waiting)[1]["answers"] == [{"model": "m2", "text": None, "pieces": 0}]
        assert call["params"]["model"] == "m2"
        assert await view(site, session) == {"state": "ended", "grant": None}
        assert (await ask(site, session, "Hello?"))[1] == {"answers": []}

    run_text_site(body)


# The page, the modes, the command, the docs


def test_the_text_page_is_served_from_the_package_and_asks_for_the_manifest_the_link_carries() -> (
    None
):
    async def body(site: Site) -> None:
        texts = {}
        for path in ("/", "/static/text.js", "/static/style.css"):
            async with site.http.get(site.url + path) as response:
                assert response.status == 200, path
                assert "default-src 'self'" in response.headers["Content-Security-Policy"]
                texts[path] = await response.text()
        page, script = texts["/"], texts["/static/text.js"]
        for needed in (
            'id="wallet-link"',
            'id="open-wallet" hidden',
            'id="question"',
            'id="answers"',
            'id="grant-models"',
            'src="/static/text.js"',
        ):
            assert needed in page
        for text in texts.values():
            assert "innerHTML" not in text and "outerHTML" not in text
            assert "insertAdjacentHTML" not in text and "document.write" not in text
            assert not re.search(r"(src|href)=\"(https?:)?//", text)
            assert "<script>" not in text
        shown = re.search(r"^const MANIFEST = (\{.*?^\});$", script, re.M | re.S)
        assert shown and json.loads(shown.group(1)) == TEXT_MANIFEST
        limits = TEXT_MANIFEST["purpose"]["limits"]
        assert f'maxlength="{limits["maxTextChars"]}"' in page
        assert f'max="{limits["maxAnswerTokens"]}"' in page
        assert "location.href = link;" in script and "a.href = link; a.hidden = false;" in script
        async with site.http.post(site.url + "/byoa/transcribe") as response:
            assert response.status in (404, 405)  # the geography game's route

    run_text_site(body)

    async def geo() -> None:
        async with running_site() as site:
            async with site.http.get(site.url + "/") as response:
                assert "Say a country" in await response.text()
            async with site.http.post(site.url + "/byoa/ask", json={"question": "x"}) as answer:
                assert answer.status in (404, 405)  # the text mode's route

    asyncio.run(geo())


def test_the_mode_is_geo_or_text() -> None:
    assert SiteDemo("ws://localhost:1/byoa/ws", mode="text").manifest == TEXT_MANIFEST
    with pytest.raises(ValueError):
        SiteDemo("ws://localhost:1/byoa/ws", mode="chat")
    assert parse().mode == "geo" and parse("--mode", "text").mode == "text"
    with pytest.raises(SystemExit):
        parse("--mode", "chat")


def test_the_docs_show_the_text_manifest_bytes_the_link_carries() -> None:
    text = (ROOT / "docs" / "site-demo.md").read_text()
    shown = re.search(r"## The text mode's manifest\n.*?```json\n(.+?)\n```", text, re.DOTALL)
    assert shown and base64.urlsafe_b64encode(shown.group(1).encode()).rstrip(b"=").decode() == (
        encode_manifest(TEXT_MANIFEST)
    )


# With the real wallet


@pytest.mark.slow
def test_the_real_wallet_answers_with_each_ticked_model_and_tells_a_change_and_the_end(
    engine: Engine, llama: LlamaServer
) -> None:
    """The text mode's link to the engine (Allow without a page to tick on), the hello's model
    codes, one question answered by SmolLM2 on llama.cpp and by the Ollama-format server, a
    limit the visitor narrows told in a grant frame, and the grant's release told by bye."""
    headers = {"Authorization": f"Bearer {TOKEN}"}

    async def main() -> list[Any]:
        runner, url, demo = await start_site(host="localhost", mode="text")
        origin = f"http://localhost:{urlsplit(url).port}"
        seen: list[Any] = []
        try:
            async with aiohttp.ClientSession() as http:

                async def shown() -> dict[str, Any]:
                    async with http.get(url + "/byoa/grant", params={"session": session}) as got:
                        return await got.json()

                async def engine_post(path: str, body: Any) -> Any:
                    async with http.post(engine.url + path, headers=headers, json=body) as got:
                        return await got.json()

                session, link = demo.new_code("127.0.0.1")
                assert (await engine_post("/v1/links", {"link": link, "decision": "allow"}))["ok"]
                for _ in range(600):
                    if demo.connection(session) is not None:
                        break
                    await asyncio.sleep(0.05)
                assert demo.connection(session) is not None, "the wallet did not connect"
                seen.append(await shown())
                question = {"question": "Name a country.", "maxTokens": 12}
                async with http.post(
                    url + "/byoa/ask", params={"session": session}, json=question
                ) as answer:
                    seen.append(await answer.json())

                changes = {"origin": origin, "choices": {"limits": {"maxCallsPerMinute": 5}}}
                changed = await engine_post("/v1/sites/limits", changes)
                assert changed["ok"], changed
                for _ in range(600):
                    if (await shown())["grant"]["limits"]["maxCallsPerMinute"] == 5:
                        break
                    await asyncio.sleep(0.05)
                seen.append(await shown())

                (grant_id,) = [g["grantId"] for g in changed["grants"]]
                async with http.delete(f"{engine.url}/v1/grants/{grant_id}", headers=headers):
                    pass
                for _ in range(600):
                    if (await shown())["state"] != "connected":
                        break
                    await asyncio.sleep(0.05)
                seen.append(await shown())
        finally:
            await demo.close()
            await runner.cleanup()
        return seen

    with serving(ollama_app) as ollama:
        path = sources_file(
            engine.home / "config" / "sources.json",
            {"name": "llama", "kind": "openai", "url": llama.url},
            {"name": "ollama", "kind": "ollama", "url": ollama.url},
        )
        try:
            first, asked, after_change, after_release = asyncio.run(main())
        finally:
            path.unlink()
    assert first["state"] == "connected"
    assert first["grant"]["models"] == ["m1", "m2"]
    assert first["grant"]["limits"]["maxCallsPerMinute"] == 20  # the manifest's
    answers = asked["answers"]
    assert [a["model"] for a in answers] == ["m1", "m2"]
    assert all(isinstance(a["text"], str) and a["text"] for a in answers), answers
    # The Ollama-format server echoes the question; SmolLM2 does not: two models answered.
    assert sum(a["text"].startswith("Name a country.") for a in answers) == 1, answers
    assert after_change["state"] == "connected"
    assert after_change["grant"]["limits"]["maxCallsPerMinute"] == 5
    assert after_change["grant"]["models"] == ["m1", "m2"]
    assert after_release == {"state": "ended", "grant": None}
