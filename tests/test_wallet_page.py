"""The wallet page in headless Chromium against the real ``serve`` and the real pool: getting
in with a one-time ticket, the consent of a link (Allow, Decline, no answer, "decide on my
own"), a budget ``ask`` answered while its call waits, sites and grants changed from the
page, activity kept current without a reload, accessibility, and every security rule.

It needs Debian's ``chromium-headless-shell`` (or ``BYOA_TEST_CHROMIUM``) and axe-core from
npm in ``.venv/npm`` (``scripts/bootstrap.sh dev`` installs both). With
``BYOA_WALLET_SCREENSHOTS=DIR`` the views' screenshots are written to DIR (``docs/wallet`` holds
the ones the docs show).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import aiohttp
import playwright.async_api as playwright
import pytest
from byoag_kit import host_of, new_code, running_platform
from engine import TOKEN, Engine
from fake_sources import OPENROUTER_KEY, openrouter_app, serving
from grants import GEO_MANIFEST, grant, in_seconds
from sitekit import until, with_site
from speech import SPEECH
from test_wallet_codes import page_table
from textkit import sources_file

from byoa_skills.byoag import RegistrationStore, pair
from byoa_skills.demos.site.demo import SiteDemo
from byoa_skills.serve.wallet.sessions import WalletSessions

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("BYOA_TEST_CHROMIUM") or shutil.which("chromium-headless-shell") or ""
AXE = ROOT / ".venv" / "npm" / "node_modules" / "axe-core" / "axe.min.js"
SHOTS = os.environ.get("BYOA_WALLET_SCREENSHOTS")
NORWAY = (SPEECH / "country-norway.wav").read_bytes()
#: Seconds a consent waits in these tests (the wallet's 120 s, shortened).
CONSENT_SECONDS = 8
MARKUP = '<img src=x onerror="document.title=1"><script>document.title=2</script><b>bold</b>'


@pytest.fixture(scope="module")
def openrouter() -> Iterator[Any]:
    with serving(openrouter_app) as server:
        yield server


@pytest.fixture(scope="module")
def wallet(
    engine_home: Path, tmp_path_factory: pytest.TempPathFactory, openrouter: Any
) -> Iterator[Engine]:
    """A ``serve`` whose browser command writes each URL it is given to ``opened.txt``, with
    consents that wait 8 s and a priced text source."""
    home = tmp_path_factory.mktemp("wallet-home")
    (home / "cache").mkdir()
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")
    sources_file(
        home / "config" / "sources.json",
        {
            "name": "openrouter",
            "kind": "openrouter",
            "url": openrouter.url + "/api/v1",
            "keyEnv": "FAKE_OR_KEY",
        },
    )
    opened = home / "opened.txt"
    script = 'printf "%s\\n" "$0" >> ' + shlex.quote(str(opened))
    browser = "sh -c " + shlex.quote(script)
    env = {
        "BYOA_WALLET_BROWSER": browser,
        "BYOA_WALLET_CONSENT_SECONDS": str(CONSENT_SECONDS),
        "FAKE_OR_KEY": OPENROUTER_KEY,
        "BYOA_WALLET_RECONNECT_SCHEDULE": "0.2,0.5,1",
    }
    running = Engine.start(
        home, ["--model", "tiny.en", "--workers", "1"], token=TOKEN, log_name="wallet.log", env=env
    )
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


# -- helpers ---------------------------------------------------------------------------------


async def api(engine: Engine, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """A call on the local API with the token."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, engine.url + path, json=body, headers=headers) as response,
    ):
        return response.status, await response.json(content_type=None)


async def page_url(engine: Engine) -> str:
    status, body = await api(engine, "POST", "/v1/wallet/tickets")
    assert status == 200, body
    return str(body["url"])


@asynccontextmanager
async def browser() -> AsyncIterator[Any]:
    assert CHROMIUM, "headless Chromium is needed (scripts/bootstrap.sh dev installs it)"
    async with playwright.async_playwright() as driver:
        launched = await driver.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            await launched.close()


@asynccontextmanager
async def wallet_page(engine: Engine, url: str | None = None) -> AsyncIterator[Any]:
    """The wallet page, signed in with a fresh ticket, in a new browser."""
    async with browser() as launched:
        page = await launched.new_page(viewport={"width": 1100, "height": 850})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(url or await page_url(engine))
        await page.wait_for_selector("body[data-ready=yes]")
        yield page
        assert errors == []


async def shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def hand_over(engine: Engine, link: str, decision: str = "ask") -> asyncio.Task[tuple[int, Any]]:
    """The link handed to the engine, as ``connect`` does, in the background."""
    return asyncio.create_task(
        api(engine, "POST", "/v1/links", {"link": link, "decision": decision})
    )


async def axe_findings(page: Any) -> list[str]:
    """axe-core's serious and critical findings on the page as it is now."""
    assert AXE.exists(), "axe-core is needed (scripts/bootstrap.sh dev installs it)"
    await page.evaluate(AXE.read_text())  # through DevTools, so the page's CSP allows it
    result = await page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{v['id']} ({v['impact']}): {v['help']}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


async def site_card(page: Any, origin: str) -> Any:
    await page.click("a[data-view=sites]")
    return page.locator(f'article.site[data-origin="{origin}"]')


# -- getting in ------------------------------------------------------------------------------


def test_a_ticket_opens_the_page_once_and_the_cookie_is_strict(wallet: Engine) -> None:
    async def main() -> tuple[int, str, int, int]:
        url = await page_url(wallet)
        ticket = url.split("#ticket=", 1)[1]
        origin = wallet.url
        async with aiohttp.ClientSession() as session:
            first = await session.post(
                f"{origin}/wallet/api/session", json={"ticket": ticket}, headers={"Origin": origin}
            )
            cookie = first.headers.get("Set-Cookie", "")
            again = await session.post(
                f"{origin}/wallet/api/session", json={"ticket": ticket}, headers={"Origin": origin}
            )
            forged = await session.post(
                f"{origin}/wallet/api/session",
                json={"ticket": "A" * 43},
                headers={"Origin": origin},
            )
            return first.status, cookie, again.status, forged.status

    status, cookie, again, forged = asyncio.run(main())
    assert status == 200
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/wallet" in cookie
    assert (again, forged) == (403, 403)


def test_an_expired_ticket_gets_nothing() -> None:
    now = [1000.0]
    sessions = WalletSessions(clock=lambda: now[0])
    ticket = sessions.new_ticket()
    now[0] += 61
    assert sessions.trade(ticket) is None
    fresh = sessions.new_ticket()
    session = sessions.trade(fresh)
    assert session is not None and sessions.valid(session)
    assert sessions.trade(fresh) is None  # used
    assert not sessions.valid("forged") and not sessions.valid(None)


def test_the_page_without_a_ticket_asks_for_one(wallet: Engine) -> None:
    async def main() -> str:
        async with browser() as launched:
            page = await launched.new_page()
            await page.goto(wallet.url + "/wallet/")
            await page.wait_for_selector("body[data-ready=signin]")
            return str(await page.text_content("#view-signin"))

    assert "byoa-skills wallet" in asyncio.run(main())


# -- consent ---------------------------------------------------------------------------------


def test_a_link_allowed_on_the_page_connects_transcribes_and_shows_in_activity(
    wallet: Engine,
) -> None:
    async def body(demo: SiteDemo) -> tuple[Any, str | None, list[str], list[str]]:
        async with wallet_page(wallet) as page:
            session, link = demo.new_code("127.0.0.1")
            answer = hand_over(wallet, link)
            card = page.locator("article.consent")
            await card.wait_for()
            shown = [
                await card.locator(".origin-full").text_content() or "",
                await card.locator(".purpose").text_content() or "",
            ]
            await shot(page, "consent")
            assert demo.hellos == []  # nothing is contacted before the answer
            await card.get_by_role("button", name="Allow", exact=True).click()
            status, taken = await answer
            await page.click("a[data-view=activity]")
            await page.wait_for_selector("#activity-rows tr")
            text = await demo.transcribe(session, NORWAY, "en")
            row = page.locator("#activity-rows tr.new", has_text="audio.transcribe")
            await row.first.wait_for()  # the call's row, without a reload
            cells = await row.first.locator("td").all_text_contents()
            await shot(page, "activity")
            return (status, taken), text, shown, cells

    (status, taken), text, shown, cells = with_site(body)
    assert status == 200 and taken["ok"] and taken["state"] == "connected", taken
    assert text is not None and "norway" in text.lower()
    assert shown[0].startswith("http://localhost:")
    assert shown[1] == GEO_MANIFEST["purpose"]["summary"]
    assert cells[1:6] == ["call", taken["origin"], "audio.transcribe", "allowed", "It worked. ok"]


def test_a_declined_link_makes_no_contact_and_works_by_keyboard(wallet: Engine) -> None:
    async def body(demo: SiteDemo) -> tuple[Any, int]:
        async with wallet_page(wallet) as page:
            _, link = demo.new_code("127.0.0.1")
            answer = hand_over(wallet, link)
            await page.locator("article.consent").wait_for()
            for _ in range(40):  # to the Decline button with the keyboard alone
                await page.keyboard.press("Tab")
                focused = await page.evaluate("document.activeElement.textContent")
                if focused == "Decline":
                    break
            await page.keyboard.press("Enter")
            result = await answer
            await asyncio.sleep(0.5)
            return result, len(demo.hellos)

    (status, answer), hellos = with_site(body)
    assert (status, answer["ok"], answer["code"], hellos) == (403, False, "declined", 0)


def test_no_answer_is_a_decline(wallet: Engine) -> None:
    async def body(demo: SiteDemo) -> tuple[Any, int, int]:
        async with wallet_page(wallet) as page:
            _, link = demo.new_code("127.0.0.1")
            result = await hand_over(wallet, link)  # nobody answers for 8 s
            with contextlib.suppress(playwright.TimeoutError):  # the page hears of the close
                await page.locator("article.consent").first.wait_for(state="detached", timeout=5000)
            left = await page.locator("article.consent").count()
            return result, len(demo.hellos), left

    (_, answer), hellos, left = with_site(body)
    assert (answer["ok"], answer["code"], hellos) == (False, "no-answer", 0)
    assert left == 0  # the consent left the page when it closed


def test_the_engine_opens_the_page_for_a_consent_from_connect_without_a_terminal(
    wallet: Engine,
) -> None:
    opened = wallet.home / "opened.txt"
    before = opened.read_text().splitlines() if opened.exists() else []

    async def body(demo: SiteDemo) -> tuple[int, str, int]:
        _, link = demo.new_code("127.0.0.1")
        env = {
            **os.environ,
            "BYOA_SKILLS_HOME": str(wallet.home),
            "BYOA_SKILLS_TOKEN": TOKEN,
            "BYOA_WALLET_DEV_LOCAL": "1",
        }
        connect = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "byoa_skills",
            "connect",
            link,
            "--port",
            str(wallet.port),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        await until(
            lambda: opened.exists() and len(opened.read_text().splitlines()) > len(before),
            "the engine to open the wallet page",
        )
        url = opened.read_text().splitlines()[-1]
        async with wallet_page(wallet, url) as page:
            card = page.locator("article.consent")
            await card.get_by_role("button", name="Allow", exact=True).click()
            out, _ = await connect.communicate()
        return await connect.wait(), out.decode(), len(demo.hellos)

    status, out, hellos = with_site(body)
    assert status == 0 and '"state": "connected"' in out, out
    assert hellos == 1


def test_decide_on_my_own_from_the_page_lets_the_next_link_in_without_asking(
    wallet: Engine,
) -> None:
    async def body(demo: SiteDemo) -> tuple[Any, Any, int]:
        async with wallet_page(wallet) as page:
            _, first = demo.new_code("127.0.0.1")
            _, taken = await hand_over(wallet, first, "allow")
            assert taken["ok"], taken
            card = await site_card(page, taken["origin"])
            await card.get_by_label("Decide on my own").check()
            await page.wait_for_selector("#status:has-text('Decide on my own is on')")
            _, second = demo.new_code("127.0.0.1")
            again = await hand_over(wallet, second)  # "ask": no consent is shown
            consents = await page.locator("article.consent").count()
            await card.get_by_label("Decide on my own").uncheck()
            await page.wait_for_selector("#status:has-text('Decide on my own is off')")
            return taken, again, consents

    _, (_, again), consents = with_site(body)
    assert again["ok"] and again["state"] == "connected" and consents == 0, again


def test_a_budget_ask_is_shown_and_answered_while_the_call_waits(wallet: Engine) -> None:
    async def main() -> tuple[str, str, Any]:
        given = grant(
            skills=["text.generate"],
            budget={"perSession": "0.00001 USD"},
            models={"m1": "openrouter/fake/echo-1"},
        )
        status, made = await api(
            wallet,
            "POST",
            "/v1/grants",
            {"origin": "https://quiz.example.org", "manifest": GEO_MANIFEST, "grant": given},
        )
        assert status == 200, made
        call = {
            "grantId": made["grantId"],
            "params": {"model": "m1", "maxTokens": 40},
            "input": {"messages": [{"role": "user", "content": "one two three"}]},
        }
        async with wallet_page(wallet) as page:
            waiting = asyncio.create_task(api(wallet, "POST", "/v1/skills/text.generate", call))
            card = page.locator("article.consent")
            await card.wait_for()
            heading = await card.locator("h3").text_content() or ""
            reasons = await card.locator("li").all_text_contents()
            await shot(page, "ask")
            assert not waiting.done()
            await card.get_by_role("button", name="Allow this call").click()
            return heading, " ".join(reasons), await waiting

    heading, reasons, (status, answer) = asyncio.run(main())
    assert heading == "quiz.example.org"
    assert "budget-exceeded" in reasons
    assert page_table()["budget-exceeded"] in reasons  # the code's sentence beside it
    assert status == 200 and answer["ok"] and answer["output"]["text"], answer


# -- sites and grants --------------------------------------------------------------------------


def test_pause_resume_release_and_forget_from_the_page(wallet: Engine) -> None:
    async def body(demo: SiteDemo) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with wallet_page(wallet) as page:
            session, link = demo.new_code("127.0.0.1")
            _, taken = await hand_over(wallet, link, "allow")
            origin, grant_id = taken["origin"], taken["grantId"]
            card = await site_card(page, origin)
            await card.get_by_role("button", name="Pause").click()
            await card.locator(".state-paused").wait_for()
            seen["paused call"] = await demo.transcribe(session, NORWAY, "en")
            await card.get_by_role("button", name="Resume").click()
            await card.locator(".state-active").wait_for()
            seen["resumed call"] = await demo.transcribe(session, NORWAY, "en")
            await shot(page, "sites")
            await card.get_by_role("button", name=f"Release grant {grant_id[:8]}").click()
            await card.get_by_text("No live grant.").wait_for()
            seen["grant after release"] = (await api(wallet, "GET", f"/v1/grants/{grant_id}"))[0]
            await card.get_by_role("button", name="Forget").click()
            await card.wait_for(state="detached")
            listed = (await api(wallet, "GET", "/wallet/api/sites"))[0]
            seen["sites without cookie"] = listed
        return seen

    seen = with_site(body)
    assert seen["paused call"] is None  # refused: the site only ever sees ok: false
    assert seen["resumed call"] and "norway" in seen["resumed call"].lower()
    assert seen["grant after release"] == 404
    assert seen["sites without cookie"] == 401


def test_engine_and_pairings_views(wallet: Engine) -> None:
    async def main() -> tuple[str, str]:
        async with wallet_page(wallet) as page:
            await page.click("a[data-view=engine]")
            await page.wait_for_selector("#engine dl")
            engine = await page.text_content("#engine") or ""
            await shot(page, "engine")
            await page.click("a[data-view=pairings]")
            await page.wait_for_selector("#view-pairings:not([hidden])")
            pairings = await page.text_content("#view-pairings") or ""
            return engine, pairings

    engine, pairings = asyncio.run(main())
    assert "tiny.en" in engine and "openrouter" in engine and "up" in engine
    assert "encoder window 30 s, let go after 600 s idle" in engine  # the layout it runs
    assert "Layout chosen by" in engine and "the options serve was started with" in engine
    assert "No platform is paired." in pairings


# -- accessibility ---------------------------------------------------------------------------


def test_every_view_has_no_serious_accessibility_finding(wallet: Engine) -> None:
    async def body(demo: SiteDemo) -> dict[str, list[str]]:
        findings: dict[str, list[str]] = {}
        async with wallet_page(wallet) as page:
            _, link = demo.new_code("127.0.0.1")
            answer = hand_over(wallet, link)
            await page.locator("article.consent").wait_for()
            findings["requests"] = await axe_findings(page)
            await (
                page.locator("article.consent")
                .get_by_role("button", name="Allow", exact=True)
                .click()
            )
            await answer
            for view in ("sites", "activity", "engine", "pairings"):
                await page.click(f"a[data-view={view}]")
                await page.wait_for_selector(f"#view-{view}:not([hidden])")
                await asyncio.sleep(0.3)  # its data arrived
                findings[view] = await axe_findings(page)
        return findings

    findings = with_site(body)
    assert findings == {
        view: [] for view in ("requests", "sites", "activity", "engine", "pairings")
    }


# -- security ----------------------------------------------------------------------------------


def test_manifest_text_is_shown_as_text(wallet: Engine) -> None:
    manifest = {**GEO_MANIFEST, "purpose": {**GEO_MANIFEST["purpose"], "summary": MARKUP}}

    async def body(demo: SiteDemo) -> tuple[str, int, str]:
        async with wallet_page(wallet) as page:
            _, link = demo.new_code("127.0.0.1")
            answer = hand_over(wallet, link)
            card = page.locator("article.consent")
            await card.wait_for()
            shown = await card.locator(".purpose").text_content() or ""
            elements = await card.locator("img, script, b").count()
            title = await page.title()
            await card.get_by_role("button", name="Decline").click()
            await answer
            return shown, elements, title

    shown, elements, title = with_site(body, manifest=manifest)
    assert shown == MARKUP and elements == 0 and title == "Agent wallet"


def test_every_wallet_answer_carries_the_security_headers(wallet: Engine) -> None:
    async def main() -> list[dict[str, str]]:
        async with aiohttp.ClientSession() as session:
            answers = []
            for path in ("/wallet/", "/wallet/app.js", "/wallet/api/sites", "/wallet/api/nothing"):
                async with session.get(wallet.url + path) as response:
                    answers.append(dict(response.headers))
            return answers

    for headers in asyncio.run(main()):
        csp = headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Cache-Control"] == "no-store"
        assert headers["Referrer-Policy"] == "no-referrer"


def test_wallet_routes_refuse_other_origins_a_rebound_host_and_no_cookie(wallet: Engine) -> None:
    async def main() -> dict[str, int]:
        url = await page_url(wallet)
        ticket = url.split("#ticket=", 1)[1]
        own = wallet.url
        other = "http://127.0.0.1:9"
        got: dict[str, int] = {}
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as session:
            async with session.post(
                f"{own}/wallet/api/session", json={"ticket": ticket}, headers={"Origin": own}
            ) as response:
                got["session"] = response.status
            async with session.get(f"{own}/wallet/api/sites") as response:
                got["read, own page"] = response.status
            async with session.get(f"{own}/wallet/api/sites", headers={"Origin": other}) as r:
                got["read, other origin"] = r.status
            async with session.get(
                f"{own}/wallet/api/sites", headers={"Sec-Fetch-Site": "same-site"}
            ) as r:
                got["read, other port's page"] = r.status
            body = {"origin": "https://victim.example.org", "action": "block"}
            async with session.post(f"{own}/wallet/api/sites", json=body) as r:
                got["change, no origin"] = r.status
            async with session.post(
                f"{own}/wallet/api/sites", json=body, headers={"Origin": other}
            ) as r:
                got["change, other origin"] = r.status
            async with session.get(
                f"{own}/wallet/api/sites", headers={"Host": "wallet.attacker.example"}
            ) as r:
                got["rebound host"] = r.status
            try:
                async with session.ws_connect(f"{own}/wallet/api/live", origin=other):
                    got["socket, other origin"] = 101
            except aiohttp.WSServerHandshakeError as refused:
                got["socket, other origin"] = refused.status
            async with session.ws_connect(f"{own}/wallet/api/live", origin=own) as ws:
                got["socket, own page"] = 101 if (await ws.receive_json())["type"] == "hello" else 0
        async with aiohttp.ClientSession() as session, session.get(f"{own}/wallet/api/sites") as r:
            got["read, no cookie"] = r.status
        return got

    assert asyncio.run(main()) == {
        "session": 200,
        "read, own page": 200,
        "read, other origin": 403,
        "read, other port's page": 403,
        "change, no origin": 403,
        "change, other origin": 403,
        "rebound host": 403,
        "socket, other origin": 403,
        "socket, own page": 101,
        "read, no cookie": 401,
    }


ATTACKER_PAGE = """<!doctype html><title>other</title><body>
<iframe id="frame" src="{wallet}/wallet/"></iframe>
<form id="form" method="post" action="{wallet}/wallet/api/sites" enctype="text/plain">
<input name='{{"origin":"https://victim.example.org","action":"block","x":"' value='"}}'>
</form>
<script>
window.results = {{}};
fetch('{wallet}/wallet/api/sites', {{credentials: 'include'}})
  .then(r => r.text()).then(t => results.read = t, e => results.read = 'failed');
fetch('{wallet}/wallet/api/sites', {{method: 'POST', mode: 'no-cors', credentials: 'include',
  headers: {{'Content-Type': 'text/plain'}},
  body: JSON.stringify({{origin: 'https://victim.example.org', action: 'block'}})}})
  .then(() => results.post = 'sent', () => results.post = 'failed');
const ws = new WebSocket('{socket}/wallet/api/live');
ws.onopen = () => results.socket = 'open';
ws.onerror = () => results.socket = 'refused';
</script></body>"""


def test_a_page_on_another_loopback_port_can_neither_read_change_open_nor_frame(
    wallet: Engine,
) -> None:
    from aiohttp import web

    async def main() -> tuple[dict[str, str], str | None, int]:
        html = ATTACKER_PAGE.format(wallet=wallet.url, socket=wallet.url.replace("http", "ws"))
        app = web.Application()

        async def attacker(request: web.Request) -> web.Response:
            return web.Response(text=html, content_type="text/html")

        app.router.add_get("/", attacker)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async with browser() as launched:
                context = await launched.new_context()
                page = await context.new_page()
                await page.goto(await page_url(wallet))  # the visitor is signed in
                await page.wait_for_selector("body[data-ready=yes]")
                other = await context.new_page()
                await other.goto(f"http://127.0.0.1:{port}/")
                await other.wait_for_function("Object.keys(window.results).length === 3")
                results = await other.evaluate("window.results")
                await other.evaluate("document.getElementById('form').submit()")
                await asyncio.sleep(1)
                framed = other.frames[1].url if len(other.frames) > 1 else None
        finally:
            await runner.cleanup()
        victim = [
            s for s in await wallet_sites(wallet) if s["origin"] == "https://victim.example.org"
        ]
        return results, framed, len(victim)

    results, framed, blocked = asyncio.run(main())
    assert results["read"] == "failed"  # CORS: the answer is not readable
    assert results["socket"] == "refused"
    assert blocked == 0  # neither the no-cors POST nor the form changed anything
    assert framed is None or framed.startswith("chrome-error:") or framed == "about:blank"


async def wallet_sites(engine: Engine) -> list[dict[str, Any]]:
    """The site list as the engine keeps it (read through a signed-in session)."""
    url = await page_url(engine)
    ticket = url.split("#ticket=", 1)[1]
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as session:
        await session.post(
            f"{engine.url}/wallet/api/session",
            json={"ticket": ticket},
            headers={"Origin": engine.url},
        )
        async with session.get(f"{engine.url}/wallet/api/sites") as response:
            return list((await response.json())["sites"])


# -- look-alike hosts and hidden characters ---------------------------------------------------

#: "paypal.com" with a Cyrillic a (U+0430): a name that mixes alphabets.
LOOK_ALIKE = "https://xn--pypal-4ve.com"
#: Reads "click YES" once U+202E (right-to-left override) is applied.
REVERSED = "\u202eSEY kcilc"
#: Any bidi control or invisible character, as it would be applied.
RAW_HIDDEN = "[\\u202a-\\u202e\\u2066-\\u2069\\u200b-\\u200f\\u2060\\ufeff\\u061c]"


def page_request(engine: Engine, origin: str, manifest: dict[str, Any]) -> Any:
    """A page's ``window.byoa.request`` after a click, as the native host relays it."""
    body = {"origin": origin, "manifest": manifest, "userActivation": True}
    return asyncio.create_task(api(engine, "POST", "/v1/extension/request", body))


def test_a_look_alike_host_is_headed_by_its_xn_form_with_a_warning(wallet: Engine) -> None:
    manifest = {**GEO_MANIFEST, "purpose": {**GEO_MANIFEST["purpose"], "summary": REVERSED}}

    async def main() -> tuple[dict[str, str], list[str], Any]:
        async with wallet_page(wallet) as page:
            asked = page_request(wallet, LOOK_ALIKE, manifest)
            card = page.locator("article.consent")
            await card.wait_for()
            await page.wait_for_selector("#status:has-text('A site is asking')")
            seen = {
                "heading": await card.locator("h3").text_content() or "",
                "written": await card.locator(".origin-full").text_content() or "",
                "warning": await card.locator(".host-warning").text_content() or "",
                "status": await page.text_content("#status") or "",
            }
            findings = await axe_findings(page)
            await shot(page, "lookalike")
            await card.get_by_role("button", name="Decline").click()
            return seen, findings, await asked

    seen, findings, (status, answer) = asyncio.run(main())
    assert seen["heading"] == "xn--pypal-4ve.com"
    assert seen["warning"] == "This name mixes alphabets; it may imitate another site."
    assert seen["written"] == f"{LOOK_ALIKE} (in Unicode p\u0430ypal.com)"
    assert seen["status"] == "A site is asking: xn--pypal-4ve.com."
    assert findings == []
    assert (status, answer) == (200, {"grant": None})


def test_bidi_controls_and_invisible_characters_are_shown_never_applied(wallet: Engine) -> None:
    origin = "https://bidi.example.org"
    manifest = {
        **GEO_MANIFEST,
        "purpose": {"summary": REVERSED, "limits": {"maxClipSeconds": 15}},
        "skills": {"audio.transcribe": {"languages": ["en", "s\u202ek"], "required": True}},
    }

    async def main() -> tuple[dict[str, Any], str]:
        async with wallet_page(wallet) as page:
            asked = page_request(wallet, origin, manifest)
            card = page.locator("article.consent")
            await card.wait_for()
            seen = {
                "purpose": await card.locator(".purpose").text_content() or "",
                "marked": await card.locator(".purpose .hidden-char").all_text_contents(),
                "facts": await card.locator("dl.facts").text_content() or "",
                "raw": await card.evaluate(f"c => /{RAW_HIDDEN}/u.test(c.textContent)"),
            }
            await card.get_by_role("button", name="Decline").click()
            await asked
            # a text the engine passes on as the page wrote it: the page marks it itself
            call = {"origin": origin, "grantId": "none", "skill": "audio\u202e.transcribe"}
            await api(wallet, "POST", "/v1/extension/call", call)
            await page.click("a[data-view=activity]")
            row = page.locator("#activity-rows tr", has_text="not-this-origin").filter(
                has_text=origin
            )
            await row.first.wait_for()
            return seen, await row.first.text_content() or ""

    seen, row = asyncio.run(main())
    assert seen["purpose"] == "⟨U+202E⟩SEY kcilc" and "\u202e" not in seen["purpose"]
    assert seen["marked"] == ["⟨U+202E⟩"]
    assert "audio.transcribe in en, s⟨U+202E⟩k (required)" in seen["facts"]
    assert seen["raw"] is False
    assert "audio⟨U+202E⟩.transcribe" in row and "\u202e" not in row


# -- a page a non-developer reads --------------------------------------------------------------

#: The reader's time zone and language in these tests: not the machine's, so that a time shown
#: in UTC, or in the machine's zone, is seen.
READER_ZONE = "Asia/Tokyo"
READER_LOCALE = "en-GB"
#: Every word of every button shown, that the browser laid out on more than one line; and
#: whether the page scrolls sideways.
BROKEN_WORDS = r"""() => {
  const broken = [];
  for (const button of document.querySelectorAll('button')) {
    if (!button.offsetParent) continue;
    const walker = document.createTreeWalker(button, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const word of node.textContent.matchAll(/\S+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const lines = new Set([...range.getClientRects()].map((box) => Math.round(box.top)));
        if (lines.size > 1) broken.push(button.textContent + ': ' + word[0]);
      }
    }
    if (button.scrollWidth > button.clientWidth) broken.push(button.textContent + ': overflows');
  }
  if (document.documentElement.scrollWidth > window.innerWidth) {
    broken.push('the page scrolls sideways: ' + document.documentElement.scrollWidth + ' px');
  }
  return broken;
}"""


#: A button squeezed to 3em that may break its words, added to the page, measured with
#: :data:`BROKEN_WORDS`, then removed.
SQUEEZED = (
    "() => { const squeezed = document.createElement('button');"
    " squeezed.textContent = 'Allow and decide on my own';"
    " Object.assign(squeezed.style,"
    " {width: '3em', whiteSpace: 'normal', overflowWrap: 'anywhere'});"
    " document.querySelector('article.consent').append(squeezed);"
    " const found = (" + BROKEN_WORDS + ")(); squeezed.remove(); return found; }"
)


@asynccontextmanager
async def reading_page(
    engine: Engine, width: int = 1100, clock: bool = False
) -> AsyncIterator[Any]:
    """The wallet page, signed in, in a browser set to :data:`READER_ZONE` and
    :data:`READER_LOCALE` that lets the page use the clipboard; with ``clock``, the page's
    clock is the test's to move (it starts at the real time)."""
    async with browser() as launched:
        context = await launched.new_context(
            viewport={"width": width, "height": 850},
            locale=READER_LOCALE,
            timezone_id=READER_ZONE,
            permissions=["clipboard-read", "clipboard-write"],
        )
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        if clock:
            await page.clock.install()
        await page.goto(await page_url(engine))
        await page.wait_for_selector("body[data-ready=yes]")
        yield page
        assert errors == []


async def granted(engine: Engine, origin: str, **changes: Any) -> str:
    """A grant for ``origin`` made on the local API; its id."""
    status, made = await api(
        engine,
        "POST",
        "/v1/grants",
        {"origin": origin, "manifest": GEO_MANIFEST, "grant": grant(**changes)},
    )
    assert status == 200, made
    return str(made["grantId"])


def entry_of(engine: Engine, kind: str, grant_id: str) -> dict[str, Any]:
    """The activity entry of ``kind`` for ``grant_id``, as the engine wrote it."""

    def found(entries: list[str]) -> bool:
        return any(
            json.loads(e).get("grant") == grant_id and json.loads(e)["kind"] == kind
            for e in entries
        )

    entries = [json.loads(e) for e in engine.activity_once(found)]
    return next(e for e in entries if e.get("grant") == grant_id and e["kind"] == kind)


async def tab_to(page: Any, target: Any, presses: int = 150) -> None:
    """Press Tab until ``target`` has the focus: it is reached by the keyboard alone."""
    for _ in range(presses):
        await page.keyboard.press("Tab")
        if await target.evaluate("node => node === document.activeElement"):
            return
    raise AssertionError("the keyboard never reached " + str(target))


def test_times_read_as_a_person_reads_them_with_the_exact_time_on_focus(wallet: Engine) -> None:
    origin = "https://times.example.org"

    async def main() -> dict[str, Any]:
        grant_id = await granted(wallet, origin, expiresAt=in_seconds(23.5 * 3600))
        seen: dict[str, Any] = {"entry": entry_of(wallet, "grant", grant_id)}
        async with reading_page(wallet, clock=True) as page:
            await page.click("a[data-view=activity]")
            row = page.locator("#activity-rows tr", has_text=origin).filter(has_text="grant")
            time = row.first.locator("time.when")
            await time.wait_for()
            seen["ago"] = await time.locator(".ago").text_content()
            seen["datetime"] = await time.get_attribute("datetime")
            await tab_to(page, time)
            tip = page.locator("#time-tip")
            seen["tip on focus"] = await tip.text_content() if await tip.is_visible() else None
            seen["read aloud"] = await time.text_content()
            await page.keyboard.press("Escape")
            seen["tip after Escape"] = await tip.is_visible()
            await row.first.evaluate("row => { row.dataset.kept = 'yes'; }")
            await page.clock.fast_forward("03:10")  # the page's clock, 3 min 10 s on
            await page.wait_for_function(
                "() => document.querySelector('#activity-rows tr[data-kept] .ago')"
                ".textContent === '3 min ago'"
            )  # the same row, aged in place
            seen["kept"] = await row.first.get_attribute("data-kept")
            await page.mouse.move(0, 0)
            await time.hover()
            seen["tip on hover"] = await tip.text_content() if await tip.is_visible() else None
            await page.click("a[data-view=sites]")
            expires = page.locator(f'tr[data-grant="{grant_id}"] time.when')
            await expires.wait_for()
            seen["expires"] = await expires.locator(".ago").text_content()
            seen["relative"] = await page.evaluate("""() => {
                const now = new Date(2026, 2, 10, 12, 0, 0).getTime();
                const min = 60 * 1000, hour = 60 * min;
                return [now - 10 * 1000, now - 150 * 1000, now - 3 * hour - 5 * min,
                        new Date(2026, 2, 9, 9, 0, 0).getTime(),
                        new Date(2026, 2, 7, 18, 0, 0).getTime(),
                        now + 30 * 1000, now + 5 * min, now + 23 * hour + 30 * min]
                  .map((at) => relativeTime(at, now));
            }""")
        return seen

    seen = asyncio.run(main())
    entry = seen["entry"]
    local = datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).astimezone(
        ZoneInfo(READER_ZONE)
    )
    assert seen["ago"] == "just now"
    assert seen["datetime"] == entry["time"]
    tip = seen["tip on focus"]
    assert tip is not None, "no exact time on keyboard focus"
    for part in (
        local.strftime("%A"),
        local.strftime("%B"),
        str(local.year),
        local.strftime("%H:%M:%S"),
    ):
        assert part in tip, (part, tip)  # the full local date and time, in the reader's zone
    assert tip in seen["read aloud"]  # and in the text a screen reader reads
    assert seen["tip after Escape"] is False
    assert seen["kept"] == "yes"
    assert seen["tip on hover"] == tip
    assert seen["expires"] == "in 23 h"
    assert seen["relative"] == [
        "just now",
        "2 min ago",
        "3 h ago",
        "yesterday",
        "7 Mar 2026",
        "in a moment",
        "in 5 min",
        "in 23 h",
    ]


def test_an_outcome_code_has_its_sentence_beside_it_in_activity(wallet: Engine) -> None:
    origin = "https://codes.example.org"

    async def main() -> dict[str, Any]:
        grant_id = await granted(
            wallet, origin, skills=["text.generate"], models={"m1": "openrouter/fake/echo-1"}
        )
        call = {
            "grantId": grant_id,
            "params": {"model": "m9"},
            "input": {"messages": [{"role": "user", "content": "hello"}]},
        }
        status, answer = await api(wallet, "POST", "/v1/skills/text.generate", call)
        assert (status, answer["code"]) == (403, "model-not-granted"), answer
        async with reading_page(wallet) as page:
            await page.click("a[data-view=activity]")
            row = page.locator("#activity-rows tr", has_text=origin).filter(has_text="call")
            outcome = row.first.locator(".outcome")
            await outcome.wait_for()
            return {
                "sentence": await outcome.locator(".sentence").text_content(),
                "code": await outcome.locator("code.code").text_content(),
                "font": await outcome.locator("code.code").evaluate(
                    "code => getComputedStyle(code).fontFamily"
                ),
                "unknown": await page.evaluate(
                    "() => { const shown = describedCode('no-such-code-yet');"
                    " return [shown.textContent, shown.querySelectorAll('.sentence').length]; }"
                ),
                "source problem": await page.evaluate(
                    "() => sourceProblem('source-down: no answer in 1.5 s').textContent"
                ),
                "store problem": await page.evaluate(
                    "() => { const box = document.createElement('p');"
                    " box.append(...storeBanner({ok: false, code: 'store-full',"
                    " message: 'the disk is full'})); return box.textContent; }"
                ),
            }

    seen = asyncio.run(main())
    assert seen["sentence"] == page_table()["model-not-granted"]
    assert seen["code"] == "model-not-granted"  # the code stays, to search for
    assert "monospace" in seen["font"]
    assert seen["unknown"] == ["no-such-code-yet", 0]  # a code the page does not know: alone
    table = page_table()
    assert seen["source problem"] == f"{table['source-down']} no answer in 1.5 s source-down"
    assert seen["store problem"] == f"{table['store-full']} the disk is full. store-full"


def test_a_grant_id_is_shortened_and_copy_gives_the_whole_id(wallet: Engine) -> None:
    origin = "https://copy.example.org"

    async def main() -> dict[str, Any]:
        grant_id = await granted(wallet, origin)
        seen: dict[str, Any] = {"id": grant_id}
        async with reading_page(wallet) as page:
            card = await site_card(page, origin)
            row = card.locator(f'tr[data-grant="{grant_id}"]')
            await row.wait_for()
            seen["shown"] = await row.locator("code.grant-id").text_content()
            copy = row.get_by_role("button", name=f"Copy grant id {grant_id[:8]}…", exact=True)
            await copy.click()
            await page.wait_for_selector("#status:has-text('Copied')")
            seen["clipboard"] = await page.evaluate("navigator.clipboard.readText()")
            # where the browser will not copy: the whole id is shown and selected
            await page.evaluate(
                "() => { navigator.clipboard.writeText = () => Promise.reject(new Error('no')); }"
            )
            await copy.click()
            await page.wait_for_selector("#status:has-text('Ctrl+C')")
            seen["selected"] = await page.evaluate("String(window.getSelection())")
            seen["shown whole"] = await row.locator("code.grant-id").text_content()
            await page.click("a[data-view=activity]")
            activity = page.locator("#activity-rows tr", has_text=origin).first
            await activity.wait_for()
            seen["in activity"] = await activity.locator("code.grant-id").text_content()
            seen["copy in activity"] = await activity.get_by_role("button").get_attribute(
                "data-copy"
            )
        return seen

    seen = asyncio.run(main())
    full = seen["id"]
    assert len(full) > 9
    assert seen["shown"] == full[:8] + "…"
    assert seen["clipboard"] == full
    assert seen["selected"] == full and seen["shown whole"] == full
    assert seen["in activity"] == full[:8] + "…" and seen["copy in activity"] == full


def test_no_word_is_broken_inside_a_button_at_360_px(wallet: Engine) -> None:
    origin = "https://narrow.example.org"

    async def main() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        broken: dict[str, list[str]] = {}
        findings: dict[str, list[str]] = {}
        await granted(wallet, origin)
        async with reading_page(wallet, width=360) as page:
            asked = page_request(wallet, "https://narrow-ask.example.org", GEO_MANIFEST)
            card = page.locator("article.consent")
            await card.wait_for()
            broken["requests"] = await page.evaluate(BROKEN_WORDS)
            broken["a squeezed button"] = await page.evaluate(SQUEEZED)  # the check sees one
            findings["requests"] = await axe_findings(page)
            await shot(page, "narrow")
            await card.get_by_role("button", name="Decline").click()
            await asked
            for view in ("sites", "activity", "engine", "pairings"):
                await page.click(f"a[data-view={view}]")
                await page.wait_for_selector(f"#view-{view}:not([hidden])")
                await asyncio.sleep(0.5)  # its data arrived
                broken[view] = await page.evaluate(BROKEN_WORDS)
                findings[view] = await axe_findings(page)
        return broken, findings

    broken, findings = asyncio.run(main())
    views = ("requests", "sites", "activity", "engine", "pairings")
    assert "Allow and decide on my own: decide" in broken.pop("a squeezed button")
    assert broken == {view: [] for view in views}
    assert findings == {view: [] for view in views}


def test_the_pairings_view_shows_a_pairing_and_axe_finds_nothing(wallet: Engine) -> None:
    async def main() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with running_platform() as platform:
            store = RegistrationStore(wallet.home / "data" / "byoag")
            paired = await pair(host_of(platform), new_code(platform), store=store)
            async with reading_page(wallet) as page:
                await page.click("a[data-view=pairings]")
                row = page.locator("#pairings tr", has_text=paired.platform)
                await row.wait_for()
                seen["row"] = await row.locator("td").all_text_contents()
                seen["ago"] = await row.locator("time.when .ago").text_content()
                seen["datetime"] = await row.locator("time.when").get_attribute("datetime")
                seen["findings"] = await axe_findings(page)
                await shot(page, "pairings")
                await page.get_by_role("button", name=f"Revoke {paired.platform}").click()
                await page.wait_for_selector("#no-pairings:not([hidden])")
                seen["left"] = [r.platform for r in store.list()]
        seen["paired"] = paired
        return seen

    seen = asyncio.run(main())
    paired = seen["paired"]
    assert seen["row"][:3] == [paired.platform, "audio.transcribe, text.generate", paired.mode]
    assert seen["ago"] == "just now" and seen["datetime"] == paired.paired_at
    assert seen["findings"] == []
    assert seen["left"] == []  # revoked from the page


# The Sites view of one origin, measured in the browser: the text of its limits, the boxes of
# its "decide on my own" line and its judge switch, and each judge select's room for its text.
SITES_VIEW = r"""(origin) => {
  const card = document.querySelector(`article.site[data-origin="${origin}"]`);
  const own = card.querySelector('input[type=checkbox][id$="-own"]').parentElement;
  const judge = card.querySelector('select[data-judge-site]').parentElement;
  const a = own.getBoundingClientRect(), b = judge.getBoundingClientRect();
  const apart = a.bottom <= b.top || b.bottom <= a.top;  // one above the other, never side by side
  const judgeSelects = document.querySelectorAll('#judge select, article.site select');
  const selects = [...judgeSelects].map((select) => {
    const shown = select.options[select.selectedIndex].text;
    const probe = select.cloneNode(false);  // the same select holding the shown text alone
    probe.removeAttribute('id');
    probe.append(new Option(shown, '', true, true));
    Object.assign(probe.style, { width: 'auto', minWidth: '0', maxWidth: 'none',
      position: 'absolute', visibility: 'hidden' });
    select.parentNode.append(probe);
    const needed = probe.getBoundingClientRect().width;
    probe.remove();
    const box = select.getBoundingClientRect();
    return { shown, needed, width: box.width, right: box.right };
  });
  return {
    limits: card.querySelector('tr[data-grant] td:nth-child(4)').innerText,
    text: card.innerText,
    ownText: own.innerText, judgeText: judge.innerText,
    nested: own.contains(judge) || judge.contains(own), apart, selects,
    viewport: window.innerWidth, pageWidth: document.documentElement.scrollWidth,
    consentLimits: limitsText({ maxCallsPerMinute: 3, maxParallelCalls: 2 }),
  };
}"""


@pytest.mark.parametrize("width", [360, 1280])
def test_the_sites_view_reads_like_the_consent_at_360_px_and_on_a_desktop(
    wallet: Engine, width: int
) -> None:
    origin = f"https://plain-words-{width}.example.org"

    async def main() -> dict[str, Any]:
        await granted(wallet, origin, limits={"maxCallsPerMinute": 3})
        async with reading_page(wallet, width=width) as page:
            card = await site_card(page, origin)
            await card.locator("tr[data-grant]").wait_for()
            await page.wait_for_selector("#judge select")
            await shot(page, f"sites-{width}")
            return dict(await page.evaluate(SITES_VIEW, origin))

    seen = asyncio.run(main())
    # the limits in force in the consent's words, the site's clip limit with the grant's rate
    assert "Calls per minute 3" in seen["limits"], seen["limits"]
    assert "Longest clip (seconds) 15" in seen["limits"], seen["limits"]
    assert not re.search(r"max[A-Z]", seen["text"]), seen["text"]
    assert seen["consentLimits"] == "Calls per minute 3, Calls at once 2"  # one mapping for both
    # "decide on my own" and the judge's switch: two boxes apart, two lines of text
    assert "Decide on my own" in seen["ownText"] and "Purpose judge" in seen["judgeText"]
    assert not seen["nested"] and seen["apart"]
    lines = seen["text"].splitlines()
    assert not [line for line in lines if "Decide on my own" in line and "judge" in line], lines
    # each judge select shows its chosen option whole, and nothing widens the page
    shown = {select["shown"] for select in seen["selects"]}
    assert {"a local model the wallet picks", "as the default"} <= shown, shown
    for select in seen["selects"]:
        assert select["width"] >= select["needed"] - 1, select
        assert select["right"] <= seen["viewport"], select
    assert seen["pageWidth"] <= seen["viewport"]
