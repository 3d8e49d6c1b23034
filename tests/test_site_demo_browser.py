"""The geography game's page in headless Chromium, with a fake microphone playing a WAV file
and a stand-in wallet on the site's WebSocket: link, wait, record, transcribe, show; and the
text mode's page: a question to each model code, the grant as the wallet tells it, bye.

It needs Debian's ``chromium-headless-shell`` (or ``BYOA_TEST_CHROMIUM`` naming a headless
Chromium) and the ``playwright`` package, which drives it; no browser is downloaded. The
full ``chromium`` does not do here: after the page opens the ``bringyourownagent:`` link,
its question about opening another program takes the page's mouse input in headless mode.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import aiohttp
import numpy as np
import playwright.async_api as playwright
import pytest
from engine import TOKEN, Engine

from byoa_skills.demos.site import start_site
from byoa_skills.wav import parse_wav

expect = playwright.expect

CHROMIUM = os.environ.get("BYOA_TEST_CHROMIUM") or shutil.which("chromium-headless-shell") or ""
SPEECH = Path(__file__).resolve().parent / "data" / "speech"
CLIP = SPEECH / "country-peru.wav"
FLAGS = [
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Takes the page's sampleRate option away: the browser records at its own rate and the page
# resamples to 16 kHz with an OfflineAudioContext.
NO_16K_CONTEXT = """
window.AudioContext = class extends window.AudioContext { constructor() { super(); } };
"""
MARKUP = '<img src=x onerror="window.injected = 1">Slovensko'

pytestmark = [pytest.mark.slow]


class StandInWallet:
    """Plays the wallet after Allow: hello with the link's code, then answers each call with
    the next text, keeping the call frames."""

    def __init__(self, link: str, answers: list[str]) -> None:
        self.params = dict(parse_qsl(urlsplit(link).query))
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []
        self.welcome: dict[str, Any] = {}

    async def run(self) -> None:
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(self.params["endpoint"]) as ws,
        ):
            await ws.send_str(
                json.dumps(
                    {
                        "type": "hello",
                        "v": "0.1",
                        "session": self.params["session"],
                        "pairing": None,
                        "wallet": {"name": "stand-in", "version": "0.1"},
                        "grant": {
                            "skills": ["audio.transcribe"],
                            "expiresAt": "2099-01-01T00:00:00Z",
                        },
                    }
                )
            )
            async for message in ws:
                frame = json.loads(message.data)
                if frame["type"] == "welcome":
                    self.welcome = frame
                elif frame["type"] == "call":
                    self.calls.append(frame)
                    text = self.answers.pop(0)
                    await ws.send_str(
                        json.dumps(
                            {
                                "type": "result",
                                "id": frame["id"],
                                "ok": True,
                                "output": {"text": text},
                            }
                        )
                    )


class StandInTextWallet:
    """Plays the wallet for the text mode: hello with models m1 and m2, then answers each
    call with the text ``answers`` gives its code (None: ``ok: false``), keeping the calls;
    the test sends grant frames and the bye on :attr:`ws`."""

    def __init__(self, link: str, answers: dict[str, str | None]) -> None:
        self.params = dict(parse_qsl(urlsplit(link).query))
        self.answers = answers
        self.calls: list[dict[str, Any]] = []
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.grant = {
            "skills": ["text.generate"],
            "expiresAt": "2099-01-01T00:00:00Z",
            "limits": {"maxCallsPerMinute": 20, "maxParallelCalls": 8},
            "models": ["m1", "m2"],
        }

    async def run(self) -> None:
        async with aiohttp.ClientSession() as http, http.ws_connect(self.params["endpoint"]) as ws:
            self.ws = ws
            await ws.send_str(
                json.dumps(
                    {
                        "type": "hello",
                        "v": "0.1",
                        "session": self.params["session"],
                        "pairing": None,
                        "wallet": {"name": "stand-in", "version": "0.1"},
                        "grant": self.grant,
                    }
                )
            )
            async for message in ws:
                frame = json.loads(message.data)
                if frame["type"] != "call":
                    continue
                self.calls.append(frame)
                text = self.answers[frame["params"]["model"]]
                answer: dict[str, Any] = {
                    "type": "result",
                    "id": frame["id"],
                    "ok": text is not None,
                }
                if text is not None:
                    answer["output"] = {"text": text}
                await ws.send_str(json.dumps(answer))

    async def send(self, frame: dict[str, Any]) -> None:
        assert self.ws is not None
        await self.ws.send_str(json.dumps(frame))


@asynccontextmanager
async def browser_page(
    url: str, init_script: str | None = None, clip: Path = CLIP
) -> AsyncIterator[Any]:
    """A page of ``url`` in headless Chromium whose microphone plays ``clip``."""
    assert CHROMIUM, "headless Chromium is needed (scripts/bootstrap.sh dev installs it)"
    async with playwright.async_playwright() as driver:
        flags = [*FLAGS, f"--use-file-for-fake-audio-capture={clip}"]
        browser = await driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=flags)
        try:
            page = await browser.new_page()
            if init_script:
                await page.add_init_script(init_script)
            await page.goto(url)
            yield page
        finally:
            await browser.close()


@pytest.mark.parametrize("context_at_16k", [True, False], ids=["16k-context", "resampled"])
def test_the_page_links_the_wallet_records_a_clip_and_shows_the_answer_as_text(
    context_at_16k: bool,
) -> None:
    async def main() -> None:
        runner, url, _ = await start_site(port=0)
        try:
            async with browser_page(url, None if context_at_16k else NO_16K_CONTEXT) as page:
                errors: list[str] = []
                page.on("pageerror", lambda error: errors.append(str(error)))
                await page.click("#wallet-link")
                await page.wait_for_selector("#open-wallet:not([hidden])")
                link = await page.get_attribute("#open-wallet", "href")
                assert link and link.startswith("bringyourownagent://connect?v=0.1&")
                wallet = StandInWallet(link, ["Peru", MARKUP])
                connected = asyncio.create_task(wallet.run())
                await page.wait_for_selector("#play:not([hidden])", timeout=20_000)
                assert wallet.welcome["manifest"] == wallet.params["manifest"]

                await page.click("#say")
                await expect(page.locator("#heard")).to_have_text("Peru", timeout=30_000)
                assert "Lima" in await page.text_content("#fact")
                call = wallet.calls[0]
                assert call["skill"] == "audio.transcribe"
                assert call["params"] == {"language": "en"}
                audio = call["input"]["audio"]
                assert audio["mime"] == "audio/wav"
                clip = parse_wav(base64.b64decode(audio["base64"], validate=True))
                assert 1.0 < clip.seconds <= 15
                assert int(np.abs(clip.samples.astype(np.int32)).max()) > 1000  # not silence

                await page.select_option("#language", "sk")
                await page.wait_for_selector("#say:not([disabled])")
                await page.click("#say")
                await expect(page.locator("#heard")).to_have_text(MARKUP, timeout=30_000)
                assert wallet.calls[1]["params"] == {"language": "sk"}
                assert await page.locator("#heard *").count() == 0  # text, not markup
                assert await page.evaluate("window.injected") is None
                rate = await page.evaluate(
                    "() => new AudioContext({ sampleRate: 16000 }).sampleRate"
                )
                assert (rate == 16000) == context_at_16k
                assert errors == []
                assert not connected.done()
            connected.cancel()
        finally:
            await runner.cleanup()

    asyncio.run(main())


def test_a_round_with_the_real_wallet(engine: Engine) -> None:
    """The page, the site and the engine's direct link with real speech recognition."""

    async def main() -> str:
        runner, url, _ = await start_site(host="localhost")
        try:
            async with browser_page(url, clip=SPEECH / "country-norway.wav") as page:
                await page.click("#wallet-link")
                await page.wait_for_selector("#open-wallet:not([hidden])")
                link = await page.get_attribute("#open-wallet", "href")
                headers = {"Authorization": f"Bearer {TOKEN}"}
                async with (
                    aiohttp.ClientSession() as http,
                    http.post(
                        f"{engine.url}/v1/links",
                        json={"link": link, "decision": "allow"},
                        headers=headers,
                    ) as response,
                ):
                    assert (await response.json())["ok"]
                await page.wait_for_selector("#play:not([hidden])", timeout=30_000)
                await page.click("#say")
                heard = page.locator("#heard")
                await expect(heard).to_contain_text("Norway", ignore_case=True, timeout=60_000)
                return str(await heard.text_content())
        finally:
            await runner.cleanup()

    assert "norway" in asyncio.run(main()).lower()


def test_the_text_page_shows_each_answer_beside_its_code_and_the_grant_the_wallet_tells() -> None:
    async def main() -> None:
        runner, url, _ = await start_site(port=0, mode="text")
        try:
            async with browser_page(url) as page:
                errors: list[str] = []
                page.on("pageerror", lambda error: errors.append(str(error)))
                await page.click("#wallet-link")
                await page.wait_for_selector("#open-wallet:not([hidden])")
                link = await page.get_attribute("#open-wallet", "href")
                assert link
                wallet = StandInTextWallet(link, {"m1": MARKUP, "m2": None})
                connected = asyncio.create_task(wallet.run())
                await expect(page.locator("#grant-models")).to_have_text("m1, m2", timeout=20_000)
                assert await page.text_content("#grant-state") == "connected"
                limits = page.locator("#grant-limits li")
                await expect(limits).to_have_text(["maxCallsPerMinute: 20", "maxParallelCalls: 8"])

                await page.fill("#question", "Which country has the most lakes?")
                await page.fill("#max-tokens", "32")
                await page.click("#ask")
                answers = page.locator("#answers article")
                await expect(answers).to_have_count(2, timeout=20_000)
                await expect(answers.locator("h3")).to_have_text(["m1", "m2"])
                await expect(answers.locator(".text")).to_have_text([MARKUP, "no answer"])
                assert await page.locator("#answers img").count() == 0  # text, not markup
                assert await page.evaluate("window.injected") is None
                assert await page.text_content("#counted") == "6 words, 33 characters"
                assert sorted(c["params"]["model"] for c in wallet.calls) == ["m1", "m2"]
                assert {c["params"]["maxTokens"] for c in wallet.calls} == {32}
                question = wallet.calls[0]["input"]["messages"][0]["content"]
                assert question == "Which country has the most lakes?"

                # The visitor unticks m1 and pauses the site: the page shows the grant frame.
                changed = {**wallet.grant, "models": ["m2"], "paused": True}
                await wallet.send({"type": "grant", "grant": changed})
                await expect(page.locator("#grant-models")).to_have_text("m2", timeout=10_000)
                await expect(page.locator("#grant-state")).to_contain_text("paused")
                await page.click("#ask")
                await expect(answers.locator("h3")).to_have_text(["m2"], timeout=10_000)
                await expect(answers.locator(".text")).to_have_text(["no answer"])
                assert len(wallet.calls) == 2  # nothing was sent while paused

                await wallet.send({"type": "bye"})
                state = page.locator("#grant-state")
                await expect(state).to_contain_text("ended", timeout=10_000)
                assert "ended this session" in str(await page.text_content("#status"))
                assert not await page.is_disabled("#wallet-link")
                assert errors == []
                await connected
        finally:
            await runner.cleanup()

    asyncio.run(main())
