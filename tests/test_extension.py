"""``window.byoa`` in Debian's ``chromium`` with the extension loaded, the real native host
(installed in a throwaway profile by ``byoa-skills extension install``), the real ``serve``
and the real pool; consents are answered on the wallet page in a tab of the same browser.

It needs ``/usr/bin/chromium`` (``BYOA_TEST_CHROMIUM_FULL`` names another), not the headless
shell, which cannot run extensions (``scripts/bootstrap.sh dev`` installs both). A request
"without a click" starts from page code alone (a timer, the load event): a test's
``evaluate`` would give the page user activation.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shlex
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import wave
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import playwright.async_api as playwright
import pytest
from aiohttp import web
from engine import TOKEN, Engine, free_port
from speech import SPEECH

from byoa_skills.demos.site import start_site
from byoa_skills.demos.site.manifest import GEO_MANIFEST
from byoa_skills.extension.install import extension_dir
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.files import write_private
from byoa_skills.store.sites import SiteStore
from byoa_skills.wav import parse_wav

expect = playwright.expect
CHROMIUM = os.environ.get("BYOA_TEST_CHROMIUM_FULL") or shutil.which("chromium") or ""
EXTENSION = extension_dir()
CLIP = SPEECH / "country-norway.wav"
NORWAY = base64.b64encode((SPEECH / "country-norway.wav").read_bytes()).decode()
CONSENT_SECONDS = 8
FLAGS = [
    f"--disable-extensions-except={EXTENSION}",
    f"--load-extension={EXTENSION}",
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [pytest.mark.slow]

# The pages of the tests' own site. Each shows what window.byoa answered in data-result.
SCRIPT = """
const M = %(manifest)s;
const show = (key, value) => {
  document.body.dataset[key] = JSON.stringify(value);
  fetch('/report/' + key, { method: 'POST', body: JSON.stringify(value) });
};
"""
PAGES = {
    # a request from a click, kept (no release on pagehide)
    "click": """<button id=ask>Ask</button><script>%(script)s
      document.querySelector('#ask').addEventListener('click', async () => {
        window.grant = await window.byoa.request(M); show('result', window.grant); });
    </script>""",
    # requests from page code alone: on load and on a timer
    "timer": """<p>no click</p><script>%(script)s
      window.addEventListener('load', async () => show('load', await window.byoa.request(M)));
      window.addEventListener('byoa:ready', () => show('ready', typeof window.byoa));
      setTimeout(async () => show('result', await window.byoa.request(M)), 300);
    </script>""",
    # a click that sends the bridge a message of its own, claiming another origin
    "forge": """<button id=ask>Ask</button><script>%(script)s
      window.addEventListener('message', (event) => {
        if (event.data && event.data.channel === 'byoa:wallet' && event.data.id === 991)
          show('result', event.data.answer); });
      document.querySelector('#ask').addEventListener('click', () => window.postMessage({
        channel: 'byoa:page', id: 991, type: 'request', origin: 'https://bank.example',
        manifest: M, userActivation: true }, '*'));
    </script>""",
    # a call with a grant id from the query, on a click
    "use": """<button id=ask>Call</button><script>%(script)s
      document.querySelector('#ask').addEventListener('click', async () => {
        const audio = await (await fetch('/norway.b64')).text();
        const id = new URLSearchParams(location.search).get('grant');
        show('result', await window.byoa.call(id, 'audio.transcribe',
          { audio: { mime: 'audio/wav', base64: audio } }, { language: 'en' })); });
    </script>""",
}


@pytest.fixture(scope="module")
def wallet(engine_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """``serve`` on ``base`` (a clip recorded through the browser's microphone needs the
    multilingual model's ear) whose token is in the user's token file, with consents that
    wait 8 s and a browser command that only writes down the URLs it is given."""
    home = tmp_path_factory.mktemp("extension-home")
    (home / "cache").mkdir()
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")
    write_private(home / "config" / "token", (TOKEN + "\n").encode())
    opened = home / "opened.txt"
    browser = "sh -c " + shlex.quote('printf "%s\\n" "$0" >> ' + shlex.quote(str(opened)))
    env = {"BYOA_WALLET_BROWSER": browser, "BYOA_WALLET_CONSENT_SECONDS": str(CONSENT_SECONDS)}
    running = Engine.start(
        home, ["--model", "base", "--workers", "1"], token=TOKEN, log_name="extension.log", env=env
    )
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def install_host(home: Path, profile: Path, port: int) -> None:
    """``byoa-skills extension install`` into the profile, for the engine on ``port``."""
    env = {**os.environ, "BYOA_SKILLS_HOME": str(home)}
    env.pop("BYOA_SKILLS_TOKEN", None)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "byoa_skills",
            "extension",
            "install",
            "--browser",
            "chromium",
            "--user-data-dir",
            str(profile),
            "--port",
            str(port),
            "--no-start",
        ],
        env=env,
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def profile(wallet: Engine, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway profile whose host talks to ``wallet``."""
    folder = tmp_path_factory.mktemp("profile")
    install_host(wallet.home, folder, wallet.port)
    return folder


def spoken_once(folder: Path) -> Path:
    """The clip with silence around it, so that the microphone plays the word once."""
    clip = parse_wav(CLIP.read_bytes())
    silence = np.zeros(16000, dtype="<i2")
    samples = np.concatenate([silence[:8000], clip.samples, silence, silence, silence])
    path = folder / "spoken-once.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(samples.tobytes())
    return path


@asynccontextmanager
async def chromium(profile: Path) -> AsyncIterator[Any]:
    """Chromium with the extension, in ``profile``, its microphone saying the clip once; the
    native host inherits no token."""
    assert CHROMIUM, "Debian's chromium is needed (scripts/bootstrap.sh dev installs it)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BYOA_")}
    flags = [*FLAGS, f"--use-file-for-fake-audio-capture={spoken_once(profile.parent)}%noloop"]
    async with playwright.async_playwright() as driver:
        context = await driver.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=flags, env=env
        )
        try:
            yield context
        finally:
            await context.close()


class PagesSite:
    """The tests' pages on loopback: ``http://localhost:PORT`` and ``http://127.0.0.1:PORT``
    are two origins of one server. What a page shows it also reports here, so that a test
    can learn it without touching the page (Playwright's every look at a page gives it user
    activation)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reports: dict[str, Any] = {}

    async def reported(self, key: str) -> Any:
        """What a page reported under ``key``, once one has."""
        for _ in range(1200):
            if key in self.reports:
                return self.reports[key]
            await asyncio.sleep(0.05)
        raise AssertionError(f"no page reported {key}")


@asynccontextmanager
async def pages_site() -> AsyncIterator[PagesSite]:
    """Serve the tests' pages (:data:`PAGES`)."""
    script = SCRIPT % {"manifest": json.dumps(GEO_MANIFEST)}
    app = web.Application()
    site = PagesSite(free_port())

    async def report(request: web.Request) -> web.Response:
        site.reports[request.match_info["key"]] = json.loads(await request.read())
        return web.Response(text="")

    async def page(request: web.Request) -> web.Response:
        body = PAGES[request.match_info["name"]] % {"script": script}
        return web.Response(
            text=f"<!doctype html><html><body>{body}</body></html>", content_type="text/html"
        )

    async def clip(request: web.Request) -> web.Response:
        return web.Response(text=NORWAY)

    app.router.add_get("/norway.b64", clip)
    app.router.add_post("/report/{key}", report)
    app.router.add_get("/{name:[a-z]+}", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", site.port).start()
    try:
        yield site
    finally:
        await runner.cleanup()


async def wallet_tab(context: Any, engine: Engine) -> Any:
    """The wallet page, signed in, in a tab of ``context``."""
    status, body = api(engine, "POST", "/v1/wallet/tickets")
    assert status == 200, body
    tab = await context.new_page()
    await tab.goto(body["url"])
    await tab.wait_for_selector("body[data-ready=yes]")
    return tab


def api(engine: Engine, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """A call on the local API with the token."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(engine.url + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {TOKEN}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


async def result(page: Any, key: str = "result") -> Any:
    """What the page showed under ``key``, once it has."""
    await page.wait_for_selector(f"body[data-{key}]", timeout=60_000)
    return json.loads(await page.get_attribute("body", f"data-{key}"))


async def until_released(engine: Engine, grant_id: str) -> bool:
    for _ in range(400):
        if api(engine, "GET", f"/v1/grants/{grant_id}")[0] == 404:
            return True
        await asyncio.sleep(0.05)
    return False


def activity(engine: Engine, origin: str) -> list[dict[str, Any]]:
    """The origin's activity entries, newest first."""
    return ActivityLog(WalletDatabase(engine.home / "data" / "wallet.sqlite3")).query(origin=origin)


def sites(engine: Engine) -> SiteStore:
    return SiteStore(WalletDatabase(engine.home / "data" / "wallet.sqlite3"))


async def answer_consent(tab: Any, origin: str, button: str) -> None:
    """Answer the consent on the wallet page, after checking it names ``origin``."""
    card = tab.locator("article.consent")
    await card.wait_for()
    assert await card.locator(".origin-full").text_content() == origin
    await card.get_by_role("button", name=button, exact=True).click()
    await card.wait_for(state="detached")


# -- the reference site ----------------------------------------------------------------------


def test_the_site_page_gets_a_grant_after_a_click_and_its_clip_back_as_text(
    wallet: Engine, profile: Path
) -> None:
    async def main() -> tuple[str, str, bool]:
        runner, url, _ = await start_site(host="localhost", port=free_port())
        origin = url
        try:
            async with chromium(profile) as context:
                tab = await wallet_tab(context, wallet)
                page = await context.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda error: errors.append(str(error)))
                await page.goto(url)
                await page.click("#use-ai")
                await answer_consent(tab, origin, "Allow")
                await page.wait_for_selector("#play:not([hidden])", timeout=30_000)
                await page.click("#say")
                heard = page.locator("#heard")
                await expect(heard).not_to_be_empty(timeout=60_000)
                text = await heard.text_content() or ""
                fact = await page.text_content("#fact") or ""
                grant_id = await page.evaluate("grant.grantId")
                await page.goto(url + "/static/style.css")  # pagehide: the page releases it
                released = await until_released(wallet, grant_id)
                assert errors == []
                return origin, text, fact, released
        finally:
            await runner.cleanup()

    origin, text, fact, released = asyncio.run(main())
    assert "norway" in text.lower() and "Oslo" in fact, (text, fact)
    assert released
    kinds = [(entry["kind"], entry.get("outcome")) for entry in activity(wallet, origin)]
    assert ("request", "ok") in kinds and ("call", "ok") in kinds and ("release", "ok") in kinds


def test_the_site_page_declares_the_manifest_its_link_carries(
    wallet: Engine, profile: Path
) -> None:
    async def main() -> Any:
        runner, url, _ = await start_site(host="localhost", port=free_port())
        try:
            async with chromium(profile) as context:
                page = await context.new_page()
                await page.goto(url)
                return await page.evaluate("MANIFEST")
        finally:
            await runner.cleanup()

    assert asyncio.run(main()) == GEO_MANIFEST


# -- the rules -------------------------------------------------------------------------------


def test_a_request_from_page_code_alone_gets_null_and_shows_no_consent(
    wallet: Engine, profile: Path
) -> None:
    async def main() -> tuple[Any, Any, int, str]:
        async with pages_site() as site, chromium(profile) as context:
            tab = await wallet_tab(context, wallet)
            page = await context.new_page()
            await page.goto(f"http://localhost:{site.port}/timer")
            on_load, on_timer = await site.reported("load"), await site.reported("result")
            shown = await tab.locator("article.consent").count()
            return on_load, on_timer, shown, f"http://localhost:{site.port}"

    on_load, on_timer, shown, origin = asyncio.run(main())
    assert (on_load, on_timer, shown) == (None, None, 0)
    outcomes = [e["outcome"] for e in activity(wallet, origin) if e["kind"] == "request"]
    assert outcomes == ["no-click", "no-click"]


def test_a_page_claiming_another_origin_is_bound_to_its_own(wallet: Engine, profile: Path) -> None:
    async def main() -> tuple[Any, str, bool]:
        async with pages_site() as site, chromium(profile) as context:
            origin = f"http://localhost:{site.port}"
            tab = await wallet_tab(context, wallet)
            page = await context.new_page()
            await page.goto(origin + "/forge")
            await page.click("#ask")
            await answer_consent(tab, origin, "Allow")  # the consent names the real origin
            answer = await result(page)
            await page.close()
            released = await until_released(wallet, answer["grant"]["grantId"])
            return answer, origin, released

    answer, origin, released = asyncio.run(main())
    grant_id = answer["grant"]["grantId"]
    assert [e["origin"] for e in activity(wallet, origin) if e.get("grant") == grant_id]
    assert activity(wallet, "https://bank.example") == []
    assert released  # its tab closed


def test_a_closed_tab_frees_its_grant_and_another_origin_cannot_use_it(
    wallet: Engine, profile: Path
) -> None:
    async def main() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with pages_site() as site, chromium(profile) as context:
            origin = f"http://localhost:{site.port}"
            tab = await wallet_tab(context, wallet)
            holder = await context.new_page()
            await holder.goto(origin + "/click")
            await holder.click("#ask")
            await answer_consent(tab, origin, "Allow")
            grant_id = (await result(holder))["grantId"]
            other = await context.new_page()  # the same server, another origin
            await other.goto(f"http://127.0.0.1:{site.port}/use?grant={grant_id}")
            await other.click("#ask")
            seen["other origin"] = await result(other)
            seen["engine, other origin"] = api(
                wallet,
                "POST",
                "/v1/extension/call",
                {
                    "origin": f"http://127.0.0.1:{site.port}",
                    "grantId": grant_id,
                    "skill": "audio.transcribe",
                    "params": {"language": "en"},
                    "input": {"audio": {"mime": "audio/wav", "base64": NORWAY}},
                },
            )[1]
            same = await context.new_page()  # the same origin, another document
            await same.goto(f"{origin}/use?grant={grant_id}")
            await same.click("#ask")
            seen["another document"] = await result(same)
            seen["live"] = api(wallet, "GET", f"/v1/grants/{grant_id}")[0]
            await holder.close()
            seen["released"] = await until_released(wallet, grant_id)
        return seen

    seen = asyncio.run(main())
    assert seen["other origin"] == {"ok": False}
    assert seen["engine, other origin"] == {"ok": False}
    assert seen["another document"] == {"ok": False}
    assert seen["live"] == 200 and seen["released"]


def test_a_paused_site_a_declined_consent_and_no_engine_give_the_same_null(
    wallet: Engine, profile: Path, tmp_path: Path
) -> None:
    # its host names a port no engine listens on, in a home where no engine runs (in the
    # wallet's home the host would find the running engine where its record says)
    nowhere = tmp_path / "nowhere-profile"
    install_host(tmp_path / "nowhere-home", nowhere, free_port())

    async def ask(context: Any, url: str, consent: Any = None) -> Any:
        page = await context.new_page()
        await page.goto(url)
        await page.click("#ask")
        if consent is not None:
            await consent
        answer = await result(page)
        await page.close()
        return answer

    async def main() -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with pages_site() as site:
            origin = f"http://localhost:{site.port}"
            async with chromium(profile) as context:
                tab = await wallet_tab(context, wallet)
                got["declined"] = await ask(
                    context, origin + "/click", answer_consent(tab, origin, "Decline")
                )
                sites(wallet).pause(origin)
                got["paused"] = await ask(context, origin + "/click")
                got["consents while paused"] = await tab.locator("article.consent").count()
                sites(wallet).resume(origin)
            async with chromium(nowhere) as context:
                got["no engine"] = await ask(context, origin + "/click")
            got["origin"] = origin
        return got

    got = asyncio.run(main())
    assert got["declined"] is None and got["paused"] is None and got["no engine"] is None
    assert got["consents while paused"] == 0
    outcomes = [e["outcome"] for e in activity(wallet, got["origin"]) if e["kind"] == "request"]
    assert outcomes == ["site-paused", "declined"]  # the reasons, newest first


def test_window_byoa_is_announced_and_frozen(wallet: Engine, profile: Path) -> None:
    async def main() -> tuple[Any, list[Any]]:
        async with pages_site() as site, chromium(profile) as context:
            page = await context.new_page()
            await page.goto(f"http://localhost:{site.port}/timer")
            ready = await site.reported("ready")
            await site.reported("result")
            return ready, await page.evaluate("""() => {
                const before = window.byoa.request;
                try { window.byoa.request = null; } catch {}
                try { window.byoa = null; } catch {}
                return [Object.isFrozen(window.byoa), window.byoa.request === before,
                        Object.keys(window.byoa).sort()];
            }""")

    ready, frozen = asyncio.run(main())
    assert ready == "object"
    assert frozen == [True, True, ["call", "release", "request"]]


def test_without_the_extension_the_site_page_takes_the_link() -> None:
    shell = shutil.which("chromium-headless-shell") or CHROMIUM

    async def main() -> str | None:
        runner, url, _ = await start_site(host="localhost", port=free_port())
        try:
            async with playwright.async_playwright() as driver:
                browser = await driver.chromium.launch(
                    executable_path=shell, headless=True, args=["--no-sandbox"]
                )
                try:
                    page = await browser.new_page()
                    await page.goto(url)
                    await page.click("#use-ai")
                    await page.wait_for_selector("#open-wallet:not([hidden])")
                    return await page.get_attribute("#open-wallet", "href")
                finally:
                    await browser.close()
        finally:
            await runner.cleanup()

    link = asyncio.run(main())
    assert link is not None and link.startswith("bringyourownagent://connect?v=0.1&")
