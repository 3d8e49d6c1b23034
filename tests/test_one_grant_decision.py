"""One grant decision, counted per site, on every way in (a page's request, a new link, the CLI
against a running engine): the visitor's kept choices hold for every grant made without a
consent; a changed purpose is more; a site that asks again gets its live grant back, never a
second one; the terminal's site changes reach the running engine and the site."""

from __future__ import annotations

import asyncio
import copy
import os
import subprocess
import sys
from typing import Any

from engine import TOKEN, Engine
from sitekit import until
from test_consent_scope import SPEECH, page_request, visitor, wallet  # noqa: F401
from test_wallet_page import api

from byoa_skills.demos.site.app import start_site
from byoa_skills.demos.site.demo import SiteDemo
from byoa_skills.demos.site.manifest import build_link, encode_manifest


def cli(engine: Engine, *args: str) -> subprocess.CompletedProcess[str]:
    """``byoa-skills sites ARGS`` against the running engine."""
    return subprocess.run(
        [sys.executable, "-m", "byoa_skills", "sites", *args,
         "--port", str(engine.port), "--token", TOKEN],
        capture_output=True, text=True, env={**os.environ, "BYOA_SKILLS_HOME": str(engine.home)},
    )  # fmt: skip


async def site_and_link(engine: Engine, decision: str) -> tuple[Any, SiteDemo, str, dict[str, Any]]:
    """The reference site on localhost, and its link taken with ``decision``."""
    runner, _, demo = await start_site(host="localhost")
    code, link = demo.new_code("127.0.0.1")
    _, taken = await api(engine, "POST", "/v1/links", {"link": link, "decision": decision})
    assert taken["ok"] and taken["state"] == "connected", taken
    return runner, demo, code, taken


def test_a_narrowed_limit_holds_on_the_next_link_and_the_site_gets_its_grant_back(
    wallet: Engine,  # noqa: F811
) -> None:
    seen: dict[str, Any] = {}

    async def main() -> None:
        runner, demo, code, first = await site_and_link(wallet, "decide-on-my-own")
        origin = first["origin"]
        try:
            narrowed = await asyncio.to_thread(
                cli, wallet, "limits", origin, "--max-calls-per-minute", "2"
            )
            assert narrowed.returncode == 0, narrowed.stderr
            second_code, second = demo.new_code("127.0.0.1")
            _, again = await api(wallet, "POST", "/v1/links", {"link": second, "decision": "ask"})
            seen["again"] = again
            connection = demo.connection(second_code)
            seen["hello again"] = connection.grants[0] if connection else None
            await api(wallet, "DELETE", f"/v1/grants/{again['grantId']}")
            third_code, third = demo.new_code("127.0.0.1")
            _, fresh = await api(wallet, "POST", "/v1/links", {"link": third, "decision": "ask"})
            seen["fresh"] = fresh
            connection = demo.connection(third_code)
            seen["hello fresh"] = connection.grants[0] if connection else None
        finally:
            await demo.close()
            await runner.cleanup()
        seen["first"] = first

    asyncio.run(main())
    first, again, fresh = seen["first"], seen["again"], seen["fresh"]
    assert again["ok"] and again["grantId"] == first["grantId"], "a second grant for one site"
    assert seen["hello again"]["limits"]["maxCallsPerMinute"] == 2, seen["hello again"]
    assert fresh["ok"] and fresh["grantId"] != first["grantId"]
    assert seen["hello fresh"]["limits"]["maxCallsPerMinute"] == 2, "the kept limit was lost"


def test_a_page_that_asks_again_gets_its_grant_back_with_the_kept_limits(
    wallet: Engine,  # noqa: F811
) -> None:
    origin = "https://again.example.org"

    async def main() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with visitor(wallet) as page:
            asking = asyncio.create_task(page_request(wallet, origin, SPEECH, True))
            await page.answer(await page.next_consent(origin), "decide-on-my-own")
            first = await asking
            seen["again"] = [await page_request(wallet, origin, SPEECH, False) for _ in range(5)]
            _, seen["narrowed"] = await api(wallet, "POST", "/v1/sites/limits", {
                "origin": origin, "choices": {"limits": {"maxCallsPerMinute": 3}}})  # fmt: skip
            seen["after narrowing"] = await page_request(wallet, origin, SPEECH, False)
            await api(wallet, "DELETE", f"/v1/grants/{first['grantId']}")
            seen["fresh"] = await page_request(wallet, origin, SPEECH, False)
            seen["first"] = first
        return seen

    seen = asyncio.run(main())
    first = seen["first"]
    assert {grant["grantId"] for grant in seen["again"]} == {first["grantId"]}, "one grant a site"
    assert seen["narrowed"]["ok"] is True
    assert seen["after narrowing"]["grantId"] == first["grantId"]
    assert seen["after narrowing"]["limits"]["maxCallsPerMinute"] == 3
    fresh = seen["fresh"]
    assert fresh is not None and fresh["grantId"] != first["grantId"]
    assert fresh["limits"]["maxCallsPerMinute"] == 3, "the kept limit was lost"


def test_a_changed_purpose_is_more_on_a_page_and_on_a_link(wallet: Engine) -> None:  # noqa: F811
    origin = "https://purpose.example.org"
    phishing = copy.deepcopy(SPEECH)
    phishing["purpose"]["summary"] = "General assistant: write any e-mail for the visitor"

    async def main() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with visitor(wallet) as page:
            asking = asyncio.create_task(page_request(wallet, origin, SPEECH, True))
            await page.answer(await page.next_consent(origin), "decide-on-my-own")
            await asking
            seen["no click"] = await page_request(wallet, origin, phishing, False)
            asking = asyncio.create_task(page_request(wallet, origin, phishing, True))
            consent = await page.next_consent(origin)
            seen["view"] = consent["view"]
            await page.answer(consent, "decline")
            seen["clicked, declined"] = await asking
            runner, demo, _, first = await site_and_link(wallet, "decide-on-my-own")
            try:
                wider = copy.deepcopy(demo.manifest)
                wider["purpose"]["summary"] = "Anything at all"
                link = build_link(demo.endpoint, encode_manifest(wider), demo.codes.issue())
                asking = asyncio.create_task(
                    api(wallet, "POST", "/v1/links", {"link": link, "decision": "ask"})
                )
                consent = await page.next_consent(first["origin"])
                seen["link view"] = consent["view"]
                await page.answer(consent, "decline")
                seen["link"] = (await asking)[1]
            finally:
                await demo.close()
                await runner.cleanup()
        return seen

    seen = asyncio.run(main())
    assert seen["no click"] is None, "a new purpose without a consent"
    assert seen["view"]["more"] == ["purpose"], seen["view"]
    assert seen["view"]["purpose"] == phishing["purpose"]["summary"]
    assert seen["view"]["previousPurposes"] == [SPEECH["purpose"]["summary"]]
    assert seen["clicked, declined"] is None
    assert seen["link view"]["more"] == ["purpose"], seen["link view"]
    assert seen["link"]["ok"] is False and seen["link"]["code"] == "declined"


def test_the_terminal_tells_the_running_engine_and_the_site(wallet: Engine) -> None:  # noqa: F811
    seen: dict[str, Any] = {}

    async def main() -> None:
        runner, demo, code, first = await site_and_link(wallet, "allow")
        origin = first["origin"]
        try:
            connection = demo.connection(code)
            assert connection is not None
            seen["pause"] = await asyncio.to_thread(cli, wallet, "pause", origin)
            await until(lambda: len(connection.grants) >= 2, "the grant frame of a pause")
            seen["paused"] = connection.grants[-1]
            seen["resume"] = await asyncio.to_thread(cli, wallet, "resume", origin)
            await until(lambda: len(connection.grants) >= 3, "the grant frame of a resume")
            seen["resumed"] = connection.grants[-1]
            seen["forget"] = await asyncio.to_thread(cli, wallet, "forget", origin)
            await until(lambda: connection.said_bye, "bye after forget")
            _, seen["grant after"] = await api(wallet, "GET", f"/v1/grants/{first['grantId']}")
        finally:
            await demo.close()
            await runner.cleanup()

    asyncio.run(main())
    assert seen["pause"].returncode == 0, seen["pause"].stderr
    assert seen["paused"]["paused"] is True and "paused" not in seen["resumed"]
    assert seen["forget"].returncode == 0 and "forgot" in seen["forget"].stdout
    assert seen["grant after"]["ok"] is False and seen["grant after"]["code"] == "unknown-grant"
