"""The reference site of the direct link, through a real server on loopback and a real
WebSocket client playing the wallet."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import aiohttp
import pytest
from aiohttp import WSMsgType
from bringyourownagent import validate_manifest

from byoa_skills.commands import site_demo
from byoa_skills.demos.site import (
    GEO_MANIFEST,
    CodeBook,
    RateLimiter,
    SiteDemo,
    encode_manifest,
    start_site,
)
from byoa_skills.demos.site.manifest import decode_manifest
from byoa_skills.directlink.check import check_link

WAV = b"RIFF" + bytes(40) + b"\x01\x00" * 800  # the site passes the bytes on unread
DATA = Path(__file__).resolve().parent / "data"
GRANT = {"skills": ["audio.transcribe"], "expiresAt": "2099-01-01T00:00:00Z"}


@dataclass
class Site:
    """A running site, its state, and an HTTP client for it."""

    url: str
    demo: SiteDemo
    http: aiohttp.ClientSession

    async def code(self) -> dict[str, str]:
        async with self.http.post(self.url + "/byoa/code") as response:
            assert response.status == 200
            return await response.json()

    async def state(self, session: str) -> str:
        async with self.http.get(self.url + "/byoa/wait", params={"session": session}) as answer:
            return (await answer.json())["state"]

    async def socket(self) -> aiohttp.ClientWebSocketResponse:
        return await self.http.ws_connect(self.url + "/byoa/ws", autoping=True)


@asynccontextmanager
async def running_site(**options: Any) -> AsyncIterator[Site]:
    runner, url, demo = await start_site(**options)
    try:
        async with aiohttp.ClientSession() as http:
            yield Site(url, demo, http)
    finally:
        await runner.cleanup()


def run_site(body: Callable[[Site], Awaitable[None]], **options: Any) -> None:
    """Run ``body`` against a fresh site on a free loopback port."""

    async def main() -> None:
        async with running_site(**options) as site:
            await body(site)

    asyncio.run(main())


def hello(session: str | None, pairing: str | None = None, grant: Any = GRANT) -> str:
    return json.dumps(
        {
            "type": "hello",
            "v": "0.1",
            "session": session,
            "pairing": pairing,
            "wallet": {"name": "test wallet", "version": "0.1"},
            "grant": grant,
        }
    )


async def frame(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    message = await ws.receive(timeout=10)
    assert message.type == WSMsgType.TEXT, message
    return json.loads(message.data)


async def closed_with(ws: aiohttp.ClientWebSocketResponse) -> tuple[int, str]:
    """The close code and reason the server sent, skipping text frames before it."""
    while True:
        message = await ws.receive(timeout=10)
        if message.type == WSMsgType.CLOSE:
            return message.data, message.extra
        assert message.type == WSMsgType.TEXT, message


async def connect(site: Site, **grant: Any) -> tuple[aiohttp.ClientWebSocketResponse, str, str]:
    """A wallet that came with a fresh code: ``(socket, session code, pairing)``."""
    code = await site.code()
    ws = await site.socket()
    await ws.send_str(hello(code["session"], grant={**GRANT, **grant}))
    welcome = await frame(ws)
    assert welcome["type"] == "welcome"
    return ws, code["session"], welcome["pairing"]


def link_parameters(link: str) -> dict[str, str]:
    parts = urlsplit(link)
    assert (parts.scheme, parts.netloc) == ("bringyourownagent", "connect")
    return dict(parse_qsl(parts.query, strict_parsing=True))


# Codes and the link


def test_code_is_a_fresh_secret_and_the_link_carries_endpoint_manifest_and_code() -> None:
    async def body(site: Site) -> None:
        first, second = await site.code(), await site.code()
        assert first["session"] != second["session"]
        assert re.fullmatch(r"[A-Za-z0-9_-]{32}", first["session"])
        assert len(base64.urlsafe_b64decode(first["session"])) == 24
        link = first["link"]
        port = urlsplit(site.url).port
        assert link.startswith(
            f"bringyourownagent://connect?v=0.1&endpoint=ws%3A%2F%2Flocalhost%3A{port}"
            "%2Fbyoa%2Fws&manifest="
        )
        params = link_parameters(link)
        assert params == {
            "v": "0.1",
            "endpoint": site.demo.endpoint,
            "manifest": site.demo.manifest64,
            "session": first["session"],
        }
        assert "=" not in params["manifest"]
        assert decode_manifest(params["manifest"]) == GEO_MANIFEST
        assert validate_manifest(GEO_MANIFEST)["ok"]
        checked = check_link(link, dev_local=True)  # the wallet's own check of a link
        assert checked.ok, checked
        assert checked.manifest_text == params["manifest"]

    run_site(body)


def test_a_public_endpoint_is_url_encoded_in_the_link() -> None:
    async def body(site: Site) -> None:
        link = (await site.code())["link"]
        assert "&endpoint=wss%3A%2F%2Fgame.example.org%2Fbyoa%2Fws&" in link
        assert check_link(link, dev_local=False).ok

    run_site(body, endpoint="wss://game.example.org/byoa/ws")


def test_the_manifest_is_the_compact_json_bytes_in_base64url() -> None:
    text = encode_manifest({"a": "é", "b": [1, 2]})
    assert base64.urlsafe_b64decode(text + "==") == '{"a":"é","b":[1,2]}'.encode()
    with pytest.raises(ValueError):
        encode_manifest({"x": "y" * 5000})


def test_codes_are_rate_limited_per_address() -> None:
    async def body(site: Site) -> None:
        for _ in range(3):
            await site.code()
        async with site.http.post(site.url + "/byoa/code") as response:
            assert response.status == 429

    run_site(body, codes_per_minute=3)


def test_the_rate_limit_counts_each_address_over_a_sliding_minute() -> None:
    now = [0.0]
    limiter = RateLimiter(2, clock=lambda: now[0])
    assert limiter.allow("a") and limiter.allow("a")
    assert not limiter.allow("a")
    assert limiter.allow("b")
    now[0] = 60.5
    assert limiter.allow("a")


def test_a_code_is_usable_once_until_it_expires() -> None:
    now = [0.0]
    book = CodeBook(120, clock=lambda: now[0])
    code, late = book.issue(), book.issue()
    assert book.state(code) == "waiting"
    assert book.use(code, "P1")
    assert not book.use(code, "P2")
    assert book.state(code) == "connected" and book.pairing(code) == "P1"
    now[0] = 120.0
    assert book.state(late) == "expired"
    assert not book.use(late, "P3")
    assert book.state(code) == "connected"
    assert book.state("unknown") == "expired" and book.state(None) == "expired"


# Hello and welcome


def test_a_fresh_code_gets_a_welcome_with_a_pairing_and_the_links_manifest() -> None:
    async def body(site: Site) -> None:
        code = await site.code()
        assert await site.state(code["session"]) == "waiting"
        ws = await site.socket()
        await ws.send_str(hello(code["session"]))
        welcome = await frame(ws)
        assert welcome["type"] == "welcome"
        assert welcome["manifest"] == link_parameters(code["link"])["manifest"]
        assert re.fullmatch(r"[A-Za-z0-9_-]{32}", welcome["pairing"])
        assert await site.state(code["session"]) == "connected"
        assert site.demo.hellos == [json.loads(hello(code["session"]))]
        connection = site.demo.connection(code["session"])
        assert connection is not None and connection.pairing == welcome["pairing"]
        assert connection.grant == GRANT and connection.max_parallel_calls == 4
        await ws.close()

    run_site(body)


def test_a_code_works_once() -> None:
    async def body(site: Site) -> None:
        ws, session, _ = await connect(site)
        again = await site.socket()
        await again.send_str(hello(session))
        assert await frame(again) == {"type": "error", "code": "bad-session"}
        assert await closed_with(again) == (1008, "bad-session")
        await ws.close()

    run_site(body)


def test_an_expired_or_unknown_code_gets_bad_session() -> None:
    async def body(site: Site) -> None:
        code = await site.code()
        while await site.state(code["session"]) != "expired":
            await asyncio.sleep(0.05)
        for session in (code["session"], "Jf3k2N0q-Yb8wQe1sX5mTt7LrA9cDhKu", 42, ""):
            ws = await site.socket()
            await ws.send_str(json.dumps({**json.loads(hello(None)), "session": session}))
            assert await frame(ws) == {"type": "error", "code": "bad-session"}
            assert await closed_with(ws) == (1008, "bad-session")
        assert site.demo.hellos == []

    run_site(body, code_lifetime=0.2)


def test_nothing_is_sent_before_a_valid_hello() -> None:
    async def body(site: Site) -> None:
        code = await site.code()
        ws = await site.socket()
        await ws.send_str('{"type":"ping"}')
        await ws.send_str('{"type":"call","id":1}')
        await ws.send_str("[1, 2]")
        await ws.send_bytes(b"\x00\x01")
        await ws.send_str(hello(code["session"]))
        assert (await frame(ws))["type"] == "welcome"  # the first frame the site sends
        await ws.close()

    run_site(body)


def test_no_hello_in_time_closes_1008() -> None:
    async def body(site: Site) -> None:
        ws = await site.socket()
        await ws.send_str('{"type":"ping"}')
        assert await closed_with(ws) == (1008, "no hello")

    run_site(body, hello_timeout=0.2)


def test_a_frame_that_is_not_json_closes_1007_before_and_after_the_hello() -> None:
    async def body(site: Site) -> None:
        ws = await site.socket()
        await ws.send_str("{not json")
        assert await closed_with(ws) == (1007, "malformed")
        ws, session, _ = await connect(site)
        await ws.send_str("NaN")
        assert await closed_with(ws) == (1007, "malformed")
        while site.demo.connection(session) is not None:
            await asyncio.sleep(0.01)

    run_site(body)


def test_frames_up_to_4_mb_pass_and_a_larger_one_closes_the_socket() -> None:
    async def body(site: Site) -> None:
        ws, session, _ = await connect(site)
        await ws.send_str(json.dumps({"type": "ping", "pad": "x" * (4 * 1024 * 1024 - 64)}))
        call = asyncio.create_task(site.demo.call(session, "audio.transcribe", {}, {}))
        await answer_calls(ws, 1)
        assert await call is not None
        with contextlib.suppress(ConnectionError):  # the site may close before all is sent
            await ws.send_str(json.dumps({"type": "ping", "pad": "x" * (4 * 1024 * 1024)}))
        while site.demo.connection(session) is not None:
            await asyncio.sleep(0.01)

    run_site(body)


def test_the_welcome_echoes_the_manifest_string_a_test_sets() -> None:
    async def body(site: Site) -> None:
        changed = site.demo.manifest64[:-1] + ("A" if site.demo.manifest64[-1] != "A" else "B")
        site.demo.welcome_manifest = changed
        code = await site.code()
        assert link_parameters(code["link"])["manifest"] == site.demo.manifest64
        ws = await site.socket()
        await ws.send_str(hello(code["session"]))
        assert (await frame(ws))["manifest"] == changed
        await ws.send_str('{"type":"bye"}')
        assert (await closed_with(ws))[0] == 1000
        while site.demo.connection(code["session"]) is not None:
            await asyncio.sleep(0.01)

    run_site(body)


def test_the_wallet_comes_back_with_its_pairing_and_replaces_the_old_socket() -> None:
    async def body(site: Site) -> None:
        old, session, pairing = await connect(site)
        new = await site.socket()
        await new.send_str(hello(None, pairing))
        welcome = await frame(new)
        assert welcome == {"type": "welcome", "pairing": pairing, "manifest": site.demo.manifest64}
        assert await frame(old) == {"type": "bye"}
        assert (await closed_with(old))[0] == 1000
        assert site.demo.connection(session).ws is not None
        assert [c.pairing for c in site.demo.connections] == [pairing]

        # Calls by the session code now go to the new socket.
        call = asyncio.create_task(site.demo.call(session, "audio.transcribe", {}, {}))
        sent = await frame(new)
        await new.send_str(
            json.dumps({"type": "result", "id": sent["id"], "ok": True, "output": {"text": "Peru"}})
        )
        assert (await call)["output"] == {"text": "Peru"}

        # Away, then back again.
        await new.close()
        while site.demo.connection(pairing) is not None:
            await asyncio.sleep(0.01)
        assert await site.demo.call(pairing, "audio.transcribe", {}, {}) is None
        back = await site.socket()
        await back.send_str(hello(None, pairing))
        assert (await frame(back))["pairing"] == pairing
        await back.close()

    run_site(body)


def test_an_unknown_pairing_or_a_pairing_with_a_code_gets_bad_session() -> None:
    async def body(site: Site) -> None:
        ws, _, pairing = await connect(site)
        for session, token in ((None, "nope" * 8), ("used-or-unknown-code-xxxxxxxx", pairing)):
            other = await site.socket()
            await other.send_str(hello(session, token))
            assert await frame(other) == {"type": "error", "code": "bad-session"}
            assert await closed_with(other) == (1008, "bad-session")
        await ws.close()

    run_site(body)


# Calls


async def answer_calls(ws: aiohttp.ClientWebSocketResponse, count: int) -> list[dict[str, Any]]:
    """Receive ``count`` call frames, then answer each ok with its id as the text."""
    calls = [await frame(ws) for _ in range(count)]
    for call in calls:
        assert call["type"] == "call"
        await ws.send_str(
            json.dumps(
                {
                    "type": "result",
                    "id": call["id"],
                    "ok": True,
                    "output": {"text": str(call["id"])},
                }
            )
        )
    return calls


@pytest.mark.parametrize(
    ("limits", "allowed"),
    [(None, 4), ({}, 4), ({"maxParallelCalls": 2}, 2), ({"maxParallelCalls": 0}, 4)],
)
def test_no_more_calls_in_flight_than_the_grant_allows(limits: Any, allowed: int) -> None:
    async def body(site: Site) -> None:
        ws, session, _ = await connect(site, **({} if limits is None else {"limits": limits}))
        calls = [
            asyncio.create_task(site.demo.call(session, "audio.transcribe", {"n": n}, {}))
            for n in range(allowed + 2)
        ]
        sent = await answer_calls(ws, allowed)
        results = await asyncio.gather(*calls)
        assert [r is not None for r in results] == [True] * allowed + [False, False]
        assert [c["input"] for c in sent] == [{"n": n} for n in range(allowed)]
        connection = site.demo.connection(session)
        assert (connection.calls_sent, connection.calls_refused) == (allowed, 2)
        # The refused calls were never sent: the next frame is the next call.
        follow = asyncio.create_task(site.demo.call(session, "audio.transcribe", {"n": "next"}))
        (last,) = await answer_calls(ws, 1)
        assert last["input"] == {"n": "next"} and last["params"] == {}
        assert (await follow)["output"] == {"text": str(last["id"])}
        await ws.close()

    run_site(body)


def test_a_call_without_an_ok_answer_is_none() -> None:
    async def body(site: Site) -> None:
        ws, session, pairing = await connect(site)
        refused = asyncio.create_task(site.demo.call(pairing, "audio.transcribe", {}, {}))
        sent = await frame(ws)
        await ws.send_str(json.dumps({"type": "result", "id": sent["id"] + 1000, "ok": True}))
        await ws.send_str('{"type":"result","id":"x"}')
        await ws.send_str('{"type":"ping"}')
        await ws.send_str('{"type":"something-new"}')
        await ws.send_str(json.dumps({"type": "result", "id": sent["id"], "ok": False}))
        assert await refused is None
        assert await site.demo.call(session, "audio.transcribe", {}, {}, timeout=0.05) is None
        await frame(ws)  # that call was sent and never answered
        assert site.demo.connection(session).in_flight == 0
        assert await site.demo.call("no-such-session", "audio.transcribe", {}, {}) is None

        # A call waiting when the wallet leaves gets None at once.
        waiting = asyncio.create_task(site.demo.call(session, "audio.transcribe", {}, {}))
        await frame(ws)
        await ws.send_str('{"type":"bye"}')
        assert await waiting is None
        assert (await closed_with(ws))[0] == 1000

    run_site(body)


# The page's transcription endpoint


def test_transcribe_forwards_the_wav_to_the_wallet_and_answers_its_text() -> None:
    async def body(site: Site) -> None:
        ws, session, _ = await connect(site)
        url = site.url + "/byoa/transcribe"
        headers = {"Content-Type": "audio/wav"}
        post = asyncio.create_task(
            site.http.post(
                url, params={"session": session, "language": "sk"}, data=WAV, headers=headers
            )
        )
        call = await frame(ws)
        assert call["skill"] == "audio.transcribe" and call["params"] == {"language": "sk"}
        assert call["input"]["audio"]["mime"] == "audio/wav"
        assert base64.b64decode(call["input"]["audio"]["base64"], validate=True) == WAV
        await ws.send_str(
            json.dumps(
                {"type": "result", "id": call["id"], "ok": True, "output": {"text": "Slovensko"}}
            )
        )
        async with await post as response:
            assert response.status == 200
            assert await response.json() == {"text": "Slovensko"}

        # The wallet says no: null, the page's own path.
        post = asyncio.create_task(
            site.http.post(url, params={"session": session}, data=WAV, headers=headers)
        )
        call = await frame(ws)
        assert call["params"] == {"language": "en"}
        await ws.send_str(json.dumps({"type": "result", "id": call["id"], "ok": False}))
        async with await post as response:
            assert await response.json() == {"text": None}

        async with site.http.post(
            url, params={"session": "unknown"}, data=WAV, headers=headers
        ) as response:
            assert await response.json() == {"text": None}
        async with site.http.post(url, params={"session": session}, data=WAV) as response:
            assert response.status == 415
        async with site.http.post(
            url, params={"session": session, "language": "de"}, data=WAV, headers=headers
        ) as response:
            assert response.status == 400
        big = WAV + bytes(1024 * 1024)
        async with site.http.post(
            url, params={"session": session}, data=big, headers=headers
        ) as response:
            assert response.status == 413
        await ws.close()

    run_site(body)


# The page


def test_the_page_is_served_from_the_package_with_nothing_from_elsewhere() -> None:
    async def body(site: Site) -> None:
        texts = {}
        for path in ("/", "/static/app.js", "/static/recorder.js", "/static/style.css"):
            async with site.http.get(site.url + path) as response:
                assert response.status == 200, path
                assert "default-src 'self'" in response.headers["Content-Security-Policy"]
                texts[path] = await response.text()
        page, script = texts["/"], texts["/static/app.js"]
        for needed in (
            'id="wallet-link"',
            'id="open-wallet" hidden',
            'id="say"',
            'id="heard"',
            'src="/static/app.js"',
        ):
            assert needed in page
        for text in texts.values():
            assert "innerHTML" not in text and "outerHTML" not in text
            assert "insertAdjacentHTML" not in text and "document.write" not in text
            assert not re.search(r"(src|href)=\"(https?:)?//", text)
            assert "<script>" not in text  # no inline script
        assert "$('#heard').textContent = text;" in script
        assert "location.href = link;" in script and "a.href = link; a.hidden = false;" in script
        assert helper(script) == helper((DATA / "wavBase64.mjs").read_text())  # verbatim
        assert "'/byoa/transcribe?session='" in script
        async with site.http.get(site.url + "/static/../demo.py") as response:
            assert response.status in (403, 404)

    run_site(body)


def helper(script: str) -> str:
    """The text of the ``wavBase64`` function in a script."""
    found = re.search(r"^function wavBase64\(samples\) \{\n.*?^\}$", script, re.M | re.S)
    assert found, "no wavBase64 helper"
    return found.group(0)


# The command


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    site_demo.add_parser(parser.add_subparsers())
    return parser.parse_args(["site-demo", *argv])


def test_the_command_names_the_endpoint_the_link_carries() -> None:
    assert site_demo.endpoint_for(parse("--public-host", "geo.example.org")) == (
        "wss://geo.example.org/byoa/ws"
    )
    local = "ws://localhost:8080/byoa/ws"
    assert site_demo.endpoint_for(parse("--endpoint", local)) == local
    assert site_demo.endpoint_for(parse()) is None  # ws://localhost:PORT once bound
    for bad in (("--endpoint", "http://x/byoa/ws"), ("--public-host", "https://x")):
        with pytest.raises(ValueError):
            site_demo.endpoint_for(parse(*bad))
    both = parse("--public-host", "geo.example.org", "--endpoint", local)
    assert both.run(both) == 2


def test_the_docs_show_the_manifest_bytes_the_link_carries() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "site-demo.md").read_text()
    shown = re.search(r"```json\n(.+?)\n```", text, re.DOTALL)
    assert shown and base64.urlsafe_b64encode(shown.group(1).encode()).rstrip(b"=").decode() == (
        encode_manifest(GEO_MANIFEST)
    )
