"""One grant decision, counted per site, on every way in (a page's request, a new link, the CLI
against a running engine): the visitor's kept choices hold for every grant made without a
consent; a changed purpose is more; a site that asks again gets its live grant back, never a
second one; the terminal's site changes reach the running engine and the site."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from engine import TOKEN, Engine, free_port
from grants import in_seconds
from sitekit import until
from speech import skill_input
from test_consent_scope import SPEECH, page_request, visitor, wallet  # noqa: F401
from test_store_damaged import wallet_api
from test_wallet_page import api

from byoa_skills.demos.site.app import start_site
from byoa_skills.demos.site.connection import WalletConnection
from byoa_skills.demos.site.demo import SiteDemo
from byoa_skills.demos.site.manifest import build_link, encode_manifest
from byoa_skills.directlink.check import check_link
from byoa_skills.directlink.client import link_origin

HELLO = skill_input("en-hello.wav")


def cli(engine: Engine, *args: str, port: int | None = None) -> subprocess.CompletedProcess[str]:
    """``byoa-skills sites ARGS`` against the running engine (or, with ``port``, against a
    port where no engine answers: the store of the engine's home)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "byoa_skills",
            "sites",
            *args,
            "--port",
            str(port or engine.port),
            "--token",
            TOKEN,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "BYOA_SKILLS_HOME": str(engine.home)},
    )


def link_entries(engine: Engine, origin: str) -> list[dict[str, Any]]:
    """The activity entries of ``origin``'s links, as committed now."""
    entries = [json.loads(text) for text in engine.activity()]
    return [e for e in entries if e.get("kind") == "link" and e.get("origin") == origin]


@asynccontextmanager
async def linked_site(
    engine: Engine, decision: str
) -> AsyncIterator[tuple[SiteDemo, str, dict[str, Any]]]:
    """The reference site on localhost, its link taken with ``decision`` (the link's code
    and the answer), and the site closed at the end."""
    runner, _, demo = await start_site(host="localhost")
    try:
        code, link = demo.new_code("127.0.0.1")
        _, taken = await api(engine, "POST", "/v1/links", {"link": link, "decision": decision})
        assert taken["ok"] and taken["state"] == "connected", taken
        yield demo, code, taken
    finally:
        await demo.close()
        await runner.cleanup()


def connected(demo: SiteDemo, code: str) -> WalletConnection:
    """The site's connection of the link of ``code``."""
    connection = demo.connection(code)
    assert connection is not None
    return connection


def speech_grant(seconds: float = 3600, **limits: Any) -> dict[str, Any]:
    """A grant document of :data:`SPEECH`'s skill for ``seconds``, with ``limits`` if any."""
    document: dict[str, Any] = {
        "byoa": "0.1-draft",
        "skills": ["audio.transcribe"],
        "budget": {"perSession": "0.05 USD"},
        "expiresAt": in_seconds(seconds),
    }
    return {**document, "limits": limits} if limits else document


def test_a_narrowed_limit_holds_on_the_next_link_and_the_site_gets_its_grant_back(
    wallet: Engine,  # noqa: F811
) -> None:
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with linked_site(wallet, "decide-on-my-own") as (demo, _, first):
            origin = first["origin"]
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
            _, seen["narrowed"] = await api(
                wallet,
                "POST",
                "/v1/sites/limits",
                {"origin": origin, "choices": {"limits": {"maxCallsPerMinute": 3}}},
            )
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
            async with linked_site(wallet, "decide-on-my-own") as (demo, _, first):
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
        async with linked_site(wallet, "allow") as (demo, code, first):
            origin = first["origin"]
            connection = connected(demo, code)
            seen["pause"] = await asyncio.to_thread(cli, wallet, "pause", origin)
            await until(lambda: len(connection.grants) >= 2, "the grant frame of a pause")
            seen["paused"] = connection.grants[-1]
            seen["resume"] = await asyncio.to_thread(cli, wallet, "resume", origin)
            await until(lambda: len(connection.grants) >= 3, "the grant frame of a resume")
            seen["resumed"] = connection.grants[-1]
            seen["forget"] = await asyncio.to_thread(cli, wallet, "forget", origin)
            await until(lambda: connection.said_bye, "bye after forget")
            _, seen["grant after"] = await api(wallet, "GET", f"/v1/grants/{first['grantId']}")

    asyncio.run(main())
    assert seen["pause"].returncode == 0, seen["pause"].stderr
    assert seen["paused"]["paused"] is True and "paused" not in seen["resumed"]
    assert seen["forget"].returncode == 0 and "forgot" in seen["forget"].stdout
    assert seen["grant after"]["ok"] is False and seen["grant after"]["code"] == "unknown-grant"


def test_a_sites_waiting_consent_is_counted_once_whichever_way_it_asks(
    wallet: Engine,  # noqa: F811
) -> None:
    seen: dict[str, Any] = {}

    async def main() -> None:
        runner, _, demo = await start_site(host="localhost")
        _, link = demo.new_code("127.0.0.1")
        origin = link_origin(check_link(link, dev_local=True))
        try:
            async with visitor(wallet) as page:
                asking = asyncio.create_task(page_request(wallet, origin, SPEECH, True))
                await page.next_consent(origin)
                linking = asyncio.create_task(
                    api(wallet, "POST", "/v1/links", {"link": link, "decision": "ask"})
                )
                waiting: list[dict[str, Any]] = []
                for _ in range(400):  # until the link is answered, or its consent shows too
                    waiting = [c for c in await page.consents() if c["origin"] == origin]
                    if linking.done() or len(waiting) > 1:
                        break
                    await asyncio.sleep(0.05)
                seen["waiting"] = len(waiting)
                for consent in waiting:
                    await page.answer(consent, "decline")
                seen["link"] = (await linking)[1]
                seen["page"] = await asking
        finally:
            await demo.close()
            await runner.cleanup()

    asyncio.run(main())
    link = seen["link"]
    assert (link["ok"], link["code"]) == (False, "request-waiting"), link
    assert seen["waiting"] == 1, "two consents of one site waiting at once"
    assert seen["page"] is None


def test_decide_on_my_own_turned_off_from_the_terminal_ends_the_return(
    wallet: Engine,  # noqa: F811
) -> None:
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with linked_site(wallet, "decide-on-my-own") as (demo, code, first):
            origin = first["origin"]
            seen["off"] = await asyncio.to_thread(cli, wallet, "decide-on-my-own", origin, "off")
            await connected(demo, code).ws.close()  # the site drops the connection
            await until(
                lambda: len(link_entries(wallet, origin)) >= 1, "the link's end", seconds=20
            )
            seen["ends"] = [e["outcome"] for e in link_entries(wallet, origin)]
            seen["hellos"] = len(demo.hellos)

    asyncio.run(main())
    assert seen["off"].returncode == 0, seen["off"].stderr
    assert seen["ends"] == ["decide-on-my-own-off"], seen["ends"]
    assert seen["hellos"] == 1, "the wallet came back to a site it no longer decides for"


def test_limits_set_while_no_engine_runs_hold_once_it_starts(
    engine_home: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")
    origin = "https://offline.example.org"
    args = ["--model", "tiny.en", "--workers", "1", "--idle-release", "0"]
    given = speech_grant()
    engine = Engine.start(home, args, token=TOKEN, log_name="first.log")
    try:
        engine.wait_ready()
        status, made = asyncio.run(
            api(
                engine, "POST", "/v1/grants", {"origin": origin, "manifest": SPEECH, "grant": given}
            )
        )
        assert status == 200, made
    finally:
        engine.stop()
    closed = free_port()  # no engine answers there: the terminal writes the store
    narrowed = cli(engine, "limits", origin, "--max-calls-per-minute", "2", port=closed)
    on = cli(engine, "decide-on-my-own", origin, "on", port=closed)
    engine = Engine.start(home, args, token=TOKEN, log_name="second.log")
    try:
        engine.wait_ready()
        _, kept = asyncio.run(api(engine, "GET", f"/v1/grants/{made['grantId']}"))
        again = asyncio.run(page_request(engine, origin, SPEECH, False))
    finally:
        engine.stop()
    assert narrowed.returncode == 0, narrowed.stderr
    assert on.returncode == 0, on.stderr
    assert kept["limits"]["maxCallsPerMinute"] == 2, kept
    assert again is not None and again["grantId"] == made["grantId"]
    assert again["limits"]["maxCallsPerMinute"] == 2


def test_the_wallet_apps_own_grant_route_keeps_one_grant_a_site(wallet: Engine) -> None:  # noqa: F811
    origin = "https://route.example.org"

    async def main() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        body = {"origin": origin, "manifest": SPEECH, "grant": speech_grant()}
        _, seen["first"] = await api(wallet, "POST", "/v1/grants", body)
        grant_id = seen["first"]["grantId"]
        _, seen["call"] = await api(
            wallet, "POST", "/v1/skills/audio.transcribe", {"grantId": grant_id, "input": HELLO}
        )
        body = {"origin": origin, "manifest": SPEECH, "grant": speech_grant(maxCallsPerMinute=2)}
        _, seen["second"] = await api(wallet, "POST", "/v1/grants", body)
        _, seen["shown"] = await api(wallet, "GET", f"/v1/grants/{grant_id}")
        seen["page"] = await page_request(wallet, origin, SPEECH, True)
        return seen

    seen = asyncio.run(main())
    first, second, shown = seen["first"], seen["second"], seen["shown"]
    assert first["ok"] and seen["call"]["ok"], seen
    assert second["ok"] and second["grantId"] == first["grantId"], "a second grant for one site"
    assert shown["limits"]["maxCallsPerMinute"] == 2, shown
    assert shown["record"]["calls"] == 1, "the site's count started afresh"
    assert seen["page"] is not None and seen["page"]["grantId"] == first["grantId"]


def test_an_expired_grants_extension_answer_is_ok_false_alone(wallet: Engine) -> None:  # noqa: F811
    origin = "https://expiring.example.org"

    async def main() -> dict[str, Any]:
        body = {"origin": origin, "manifest": SPEECH, "grant": speech_grant(1.5)}
        _, made = await api(wallet, "POST", "/v1/grants", body)
        assert made["ok"], made
        ends = datetime.fromisoformat(made["expiresAt"].replace("Z", "+00:00"))
        await until(lambda: datetime.now(timezone.utc) > ends, "the grant's expiry")
        call = {
            "origin": origin,
            "grantId": made["grantId"],
            "skill": "audio.transcribe",
            "input": HELLO,
        }
        return (await api(wallet, "POST", "/v1/extension/call", call))[1]

    answer = asyncio.run(main())
    assert answer == {"ok": False}, answer


def test_a_budget_change_sends_no_grant_frame_the_same_as_the_last(wallet: Engine) -> None:  # noqa: F811
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with linked_site(wallet, "allow") as (demo, code, first):
            origin = first["origin"]
            connection = connected(demo, code)
            _, seen["budget"] = await api(
                wallet,
                "POST",
                "/v1/sites/limits",
                {"origin": origin, "choices": {"budget": "0.01 USD"}},
            )
            _, seen["limit"] = await api(
                wallet,
                "POST",
                "/v1/sites/limits",
                {"origin": origin, "choices": {"limits": {"maxCallsPerMinute": 3}}},
            )
            await until(lambda: len(connection.grants) >= 2, "the grant frame of the limit")
            seen["frames"] = list(connection.grants)

    asyncio.run(main())
    assert seen["budget"]["ok"] and seen["limit"]["ok"], seen
    frames = seen["frames"]
    assert frames[1] != frames[0], "a grant frame the same as the hello's"
    assert frames[1]["limits"]["maxCallsPerMinute"] == 3, frames


def test_a_grant_changed_on_the_page_is_told_to_the_site(wallet: Engine) -> None:  # noqa: F811
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with linked_site(wallet, "allow") as (demo, code, first):
            connection = connected(demo, code)
            change = f"/wallet/api/grants/{first['grantId']}/change"
            [seen["change"]] = await wallet_api(
                wallet, [("POST", change, {"limits": {"maxCallsPerMinute": 3}})]
            )
            await until(lambda: len(connection.grants) >= 2, "the grant frame of the change")
            seen["frames"] = list(connection.grants)

    asyncio.run(main())
    status, answer = seen["change"]
    assert status == 200 and answer["ok"], answer
    assert seen["frames"][1]["limits"]["maxCallsPerMinute"] == 3, seen["frames"]


def test_a_block_from_the_terminal_ends_the_sites_link_and_its_grant(wallet: Engine) -> None:  # noqa: F811
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with linked_site(wallet, "allow") as (demo, code, first):
            origin = first["origin"]
            connection = connected(demo, code)
            seen["block"] = await asyncio.to_thread(cli, wallet, "block", origin)
            await until(lambda: connection.said_bye, "bye after a block", seconds=10)
            call = {
                "origin": origin,
                "grantId": first["grantId"],
                "skill": "audio.transcribe",
                "input": HELLO,
            }
            _, seen["page call"] = await api(wallet, "POST", "/v1/extension/call", call)
            _, seen["grant after"] = await api(wallet, "GET", f"/v1/grants/{first['grantId']}")
            await asyncio.to_thread(cli, wallet, "forget", origin)  # the shared engine's list

    asyncio.run(main())
    assert seen["block"].returncode == 0, seen["block"].stderr
    assert seen["page call"] == {"ok": False}, seen["page call"]
    assert seen["grant after"]["ok"] is False and seen["grant after"]["code"] == "unknown-grant"


def test_the_visitors_expiry_holds_on_the_next_link_after_a_sites_view_change(
    wallet: Engine,  # noqa: F811
) -> None:
    seen: dict[str, Any] = {}

    async def main() -> None:
        runner, _, demo = await start_site(host="localhost")
        try:
            async with visitor(wallet) as page:
                _, link = demo.new_code("127.0.0.1")
                origin = link_origin(check_link(link, dev_local=True))
                taking = asyncio.create_task(
                    api(wallet, "POST", "/v1/links", {"link": link, "decision": "ask"})
                )
                consent = await page.next_consent(origin)
                await page.answer(consent, "decide-on-my-own", {"expiresInMinutes": 30})
                _, first = await taking
            assert first["ok"], first
            _, seen["change"] = await api(
                wallet,
                "POST",
                "/v1/sites/limits",
                {"origin": origin, "choices": {"limits": {"maxCallsPerMinute": 3}}},
            )
            await api(wallet, "DELETE", f"/v1/grants/{first['grantId']}")
            _, second = demo.new_code("127.0.0.1")
            seen["asked"] = datetime.now(timezone.utc)
            _, seen["next"] = await api(
                wallet, "POST", "/v1/links", {"link": second, "decision": "ask"}
            )
            seen["hello"] = demo.hellos[-1]["grant"]
            await asyncio.to_thread(cli, wallet, "forget", origin)  # the shared engine's list
        finally:
            await demo.close()
            await runner.cleanup()

    asyncio.run(main())
    assert seen["change"]["ok"] and seen["next"]["ok"], seen
    ends = datetime.fromisoformat(seen["hello"]["expiresAt"].replace("Z", "+00:00"))
    assert (ends - seen["asked"]).total_seconds() <= 31 * 60, (
        "the next link's grant got the default day, not the 30 minutes the visitor chose"
    )
    assert seen["hello"]["limits"]["maxCallsPerMinute"] == 3, seen["hello"]


def test_a_change_during_the_welcome_wait_is_told_once_the_site_welcomes(
    wallet: Engine,  # noqa: F811
) -> None:
    seen: dict[str, Any] = {}

    async def main() -> None:
        runner, _, demo = await start_site(host="localhost")
        heard, welcome_now = asyncio.Event(), asyncio.Event()
        welcome = demo._welcome

        async def held_welcome(ws: Any, hello: Any) -> Any:  # the site takes its time
            heard.set()
            await welcome_now.wait()
            return await welcome(ws, hello)

        demo._welcome = held_welcome  # type: ignore[method-assign]
        try:
            code, link = demo.new_code("127.0.0.1")
            origin = link_origin(check_link(link, dev_local=True))
            taking = asyncio.create_task(
                api(wallet, "POST", "/v1/links", {"link": link, "decision": "allow"})
            )
            await asyncio.wait_for(heard.wait(), 20)  # the hello is out, the welcome waits
            _, seen["change"] = await api(
                wallet,
                "POST",
                "/v1/sites/limits",
                {"origin": origin, "choices": {"limits": {"maxCallsPerMinute": 3}}},
            )
            welcome_now.set()
            _, seen["taken"] = await taking
            connection = connected(demo, code)
            await until(
                lambda: connection.grants[-1]["limits"].get("maxCallsPerMinute") == 3,
                "the change told to the site",
                seconds=10,
            )
            await asyncio.to_thread(cli, wallet, "forget", origin)  # the shared engine's list
        finally:
            await demo.close()
            await runner.cleanup()

    asyncio.run(main())
    assert seen["change"]["ok"] and seen["taken"]["ok"], seen
