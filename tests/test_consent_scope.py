"""Consent is the only way to more: "decide on my own" lets a site come back for what the
visitor allowed, never for more; a manifest that breaks the rules is never shown; consents
and links waiting at once are bounded."""

from __future__ import annotations

import asyncio
import copy
import json
import shlex
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from engine import TOKEN, Engine
from grants import GEO_MANIFEST, grant, in_seconds
from test_wallet_page import api

from byoa_skills.consent.desk import (
    ASK_WAITING,
    MAX_CONSENTS_WAITING,
    TOO_MANY_CONSENTS,
    ConsentDesk,
)
from byoa_skills.consent.scope import Scope, difference_manifest, manifest_problems, more_than
from byoa_skills.demos.site.app import start_site
from byoa_skills.demos.site.manifest import build_link, encode_manifest
from byoa_skills.serve.wallet.opener import PageOpener
from byoa_skills.wallet_shim.gate import Measured, admit
from byoa_skills.wallet_shim.grants import build_grant

PAGE = "https://geo.example.org"
#: The geography game's manifest cut to the one skill this engine serves without a source.
SPEECH = copy.deepcopy(GEO_MANIFEST)
del SPEECH["skills"]["text.generate"]


def changed(**parts: Any) -> dict[str, Any]:
    """:data:`SPEECH` with top-level parts replaced."""
    document = copy.deepcopy(SPEECH)
    document.update(copy.deepcopy(parts))
    return document


# -- the scope, alone ---------------------------------------------------------------------------


def test_a_scope_covers_the_same_or_less_and_names_each_kind_of_more() -> None:
    allowed = Scope.of(SPEECH)
    assert not more_than(allowed, SPEECH)
    fewer = copy.deepcopy(SPEECH)
    fewer["skills"]["audio.transcribe"]["languages"] = ["en"]
    fewer["purpose"]["limits"]["maxClipSeconds"] = 5
    fewer["expectedCost"] = {"perSession": "0.01 USD"}
    assert not more_than(allowed, fewer)

    budget = changed(expectedCost={"perSession": "5 USD"})
    assert more_than(allowed, budget).codes() == ["budget"]
    other_money = changed(expectedCost={"perSession": "0.05 EUR"})
    assert more_than(allowed, other_money).codes() == ["budget"]
    language = copy.deepcopy(SPEECH)
    language["skills"]["audio.transcribe"]["languages"].append("de")
    assert more_than(allowed, language).languages == {"audio.transcribe": ("de",)}
    any_language = copy.deepcopy(SPEECH)
    del any_language["skills"]["audio.transcribe"]["languages"]
    assert more_than(allowed, any_language).codes() == ["language"]
    looser = copy.deepcopy(SPEECH)
    looser["purpose"]["limits"]["maxCallsPerMinute"] = 400
    assert more_than(allowed, looser).limits == {"maxCallsPerMinute": 400}
    dropped = copy.deepcopy(SPEECH)
    del dropped["purpose"]["limits"]["maxClipSeconds"]
    assert more_than(allowed, dropped).limits == {"maxClipSeconds": None}
    assert more_than(allowed, GEO_MANIFEST).skills == ("text.generate",)
    assert more_than(allowed, changed(privacy="anything")).codes() == ["privacy"]
    models = copy.deepcopy(GEO_MANIFEST)
    models["skills"]["text.generate"]["models"] = {"count": 2}
    both = Scope.of(GEO_MANIFEST)
    assert more_than(both, models).codes() == ["model"]
    assert more_than(None, SPEECH).codes() == ["skill", "budget", "privacy", "purpose"]
    purpose = changed(purpose={**SPEECH["purpose"], "summary": "Write any e-mail"})
    assert more_than(allowed, purpose).codes() == ["purpose"]
    assert more_than(allowed, purpose).held_purposes == (SPEECH["purpose"]["summary"],)


def test_a_widened_scope_keeps_the_widest_of_both_and_survives_json() -> None:
    english = copy.deepcopy(SPEECH)
    english["skills"]["audio.transcribe"]["languages"] = ["en"]
    english["purpose"]["limits"] = {"maxClipSeconds": 10}
    french = copy.deepcopy(SPEECH)
    french["skills"]["audio.transcribe"]["languages"] = ["fr"]
    french["expectedCost"] = {"perSession": "0.10 USD"}
    wide = Scope.of(english).widened(Scope.of(french))
    assert wide.skills["audio.transcribe"] == frozenset({"en", "fr"})
    assert "maxCallsPerMinute" not in wide.limits  # one of them had no such limit
    assert wide.limits == {"maxClipSeconds": 15}
    back = Scope.from_json(json.loads(json.dumps(wide.to_json())))
    assert back == wide
    assert Scope.from_json({"skills": []}) is None
    assert Scope.from_json(None) is None


def test_the_difference_shows_only_what_is_more() -> None:
    wanted = copy.deepcopy(GEO_MANIFEST)
    wanted["skills"]["audio.transcribe"]["languages"].append("de")
    wanted["expectedCost"] = {"perSession": "0.05 USD"}
    wanted["purpose"]["limits"]["maxCallsPerMinute"] = 60
    shown = difference_manifest(wanted, more_than(Scope.of(SPEECH), wanted))
    assert shown["skills"]["audio.transcribe"]["languages"] == ["de"]
    assert shown["skills"]["text.generate"] == {"required": False}
    assert shown["purpose"]["limits"] == {"maxCallsPerMinute": 60}
    assert "expectedCost" not in shown  # not more than allowed
    first = difference_manifest(SPEECH, more_than(None, SPEECH))
    assert first["purpose"]["limits"] == SPEECH["purpose"]["limits"], "a first consent shows all"
    assert first["expectedCost"] == SPEECH["expectedCost"]


def test_a_manifest_is_checked_on_the_reference_rules_and_the_wallets_own() -> None:
    assert manifest_problems(SPEECH) == []
    bad = changed(
        skills={"<script>": {"required": True}}, expectedCost={"perSession": "FREE \u2714 verified"}
    )
    codes = {problem["code"] for problem in manifest_problems(bad)}
    assert codes and all(isinstance(code, str) for code in codes)
    flood = copy.deepcopy(SPEECH)
    flood["purpose"]["limits"]["maxCallsPerMinute"] = 2**53 - 1
    assert [p["code"] for p in manifest_problems(flood)] == ["limit-invalid"]


# -- asks bounded -------------------------------------------------------------------------------


def made_grant(origin: str = PAGE) -> Any:
    given = grant(
        skills=["audio.transcribe"],
        budget={"perSession": "0.000001 USD"},
        expiresAt=in_seconds(3600),
    )
    return build_grant(origin, SPEECH, given, 0)


def test_one_call_of_a_grant_waits_for_the_visitor_at_a_time() -> None:
    async def main() -> tuple[Any, Any, int]:
        desk = ConsentDesk(seconds=5)
        one = made_grant()
        call = {"skill": "audio.transcribe", "input": {"clipSeconds": 1}}
        first = asyncio.create_task(desk.ask_call(one, call, []))
        await asyncio.sleep(0.05)
        second = await desk.ask_call(one, call, [])  # answered at once, nothing shown
        shown = len(desk.waiting())
        desk.answer(desk.waiting()[0].id, "allow")
        return await first, second, shown

    first, second, shown = asyncio.run(main())
    assert first is True and second == ASK_WAITING and shown == 1


def test_one_site_cannot_fill_the_desk_with_asks_and_another_sites_request_is_shown() -> None:
    async def main() -> tuple[list[Any], list[str], Any]:
        desk = ConsentDesk(seconds=5)
        call = {"skill": "audio.transcribe", "input": {"clipSeconds": 1}}
        grants = [made_grant() for _ in range(MAX_CONSENTS_WAITING + 2)]  # one site, many grants
        asks = [asyncio.create_task(desk.ask_call(one, call, [])) for one in grants]
        await asyncio.sleep(0.1)
        other = asyncio.create_task(desk.ask("request", "https://other.example", {}))
        await asyncio.sleep(0.1)
        shown = [consent.origin for consent in desk.waiting()]
        for consent in desk.waiting():
            desk.answer(
                consent.id, "allow" if consent.origin == "https://other.example" else "decline"
            )
        return list(await asyncio.gather(*asks)), shown, await other

    answers, shown, other = asyncio.run(main())
    assert shown == [PAGE, "https://other.example"]  # one ask of the site waits, the request too
    assert answers.count(ASK_WAITING) == MAX_CONSENTS_WAITING + 1 and answers.count(False) == 1
    assert other == "allow"


def test_the_desk_shows_a_bounded_number_of_consents() -> None:
    async def main() -> tuple[list[str], int]:
        desk = ConsentDesk(seconds=5)
        asks = [
            asyncio.create_task(desk.ask("request", f"https://s{i}.example", {}))
            for i in range(MAX_CONSENTS_WAITING + 5)
        ]
        await asyncio.sleep(0.1)
        waiting = len(desk.waiting())
        for consent in desk.waiting():
            desk.answer(consent.id, "decline")
        return list(await asyncio.gather(*asks)), waiting

    answers, waiting = asyncio.run(main())
    assert waiting == MAX_CONSENTS_WAITING
    assert answers.count(TOO_MANY_CONSENTS) == 5
    assert answers.count("decline") == MAX_CONSENTS_WAITING


def test_the_gate_refuses_a_call_it_could_not_ask_about_with_the_desks_code() -> None:
    async def main() -> Any:
        measured = Measured(
            skill="audio.transcribe",
            params={},
            input={"clipSeconds": 1.0},
            provider="local-model",
            estimate=Decimal("1"),
        )
        return await admit(made_grant(), measured, 0, lambda grant, call, reasons: ASK_WAITING)

    admission = asyncio.run(main())
    assert admission.admitted is False and admission.code == ASK_WAITING


def test_the_page_is_opened_at_most_once_every_few_seconds() -> None:
    now = [100.0]
    opened: list[str] = []
    opener = PageOpener(every=5, clock=lambda: now[0], opener=opened.append)
    results = [opener.open(f"u{i}") for i in range(40)]
    now[0] += 5.1
    results.append(opener.open("later"))
    assert opened == ["u0", "later"] and results.count(True) == 2


# -- a real engine ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wallet(engine_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """``serve`` on ``tiny.en``, consents that wait 20 s, a browser command that writes down
    the URLs it is given."""
    home = tmp_path_factory.mktemp("consent-scope-home")
    (home / "cache").mkdir()
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")
    opened = home / "opened.txt"
    browser = "sh -c " + shlex.quote('printf "%s\\n" "$0" >> ' + shlex.quote(str(opened)))
    env = {"BYOA_WALLET_BROWSER": browser, "BYOA_WALLET_CONSENT_SECONDS": "20"}
    running = Engine.start(
        home,
        ["--model", "tiny.en", "--workers", "1", "--idle-release", "0"],
        token=TOKEN,
        log_name="consent-scope.log",
        env=env,
    )
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


class Visitor:
    """The wallet page's API, signed in as the page is: the consents waiting, and answers."""

    def __init__(self, engine: Engine, session: aiohttp.ClientSession) -> None:
        self.engine = engine
        self.session = session

    async def consents(self) -> list[dict[str, Any]]:
        async with self.session.get(f"{self.engine.url}/wallet/api/consents") as response:
            body = await response.json()
        return list(body["consents"])

    async def next_consent(self, origin: str, seconds: float = 30) -> dict[str, Any]:
        for _ in range(int(seconds / 0.05)):
            for consent in await self.consents():
                if consent["origin"] == origin:
                    return consent
            await asyncio.sleep(0.05)
        raise AssertionError(f"no consent for {origin}")

    async def answer(
        self, consent: dict[str, Any], decision: str, choices: dict[str, Any] | None = None
    ) -> None:
        url = f"{self.engine.url}/wallet/api/consents/{consent['id']}"
        body = (
            {"decision": decision}
            if choices is None
            else {"decision": decision, "choices": choices}
        )
        async with self.session.post(
            url, json=body, headers={"Origin": self.engine.url}
        ) as response:
            assert response.status == 200, await response.text()


@asynccontextmanager
async def visitor(engine: Engine) -> AsyncIterator[Visitor]:
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as session:
        status, body = await api(engine, "POST", "/v1/wallet/tickets")
        assert status == 200, body
        ticket = body["url"].split("#ticket=", 1)[1]
        async with session.post(
            f"{engine.url}/wallet/api/session",
            json={"ticket": ticket},
            headers={"Origin": engine.url},
        ) as response:
            assert response.status == 200, await response.text()
        yield Visitor(engine, session)


async def page_request(engine: Engine, origin: str, manifest: Any, clicked: bool) -> Any:
    status, body = await api(
        engine,
        "POST",
        "/v1/extension/request",
        {"origin": origin, "manifest": manifest, "userActivation": clicked},
    )
    assert status == 200, body
    return body["grant"]


def request_outcomes(engine: Engine, origin: str, count: int) -> list[dict[str, Any]]:
    """The activity entries of ``origin``'s requests, once there are ``count`` of them."""

    def of_origin(texts: list[str]) -> list[dict[str, Any]]:
        entries = [json.loads(text) for text in texts]
        return [e for e in entries if e.get("kind") == "request" and e.get("origin") == origin]

    return of_origin(engine.activity_once(lambda texts: len(of_origin(texts)) >= count))


def test_decide_on_my_own_comes_back_for_as_much_never_for_more(wallet: Engine) -> None:
    origin = "https://widen.example.org"

    async def main() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with visitor(wallet) as page:
            asking = asyncio.create_task(page_request(wallet, origin, SPEECH, True))
            consent = await page.next_consent(origin)
            seen["first view"] = consent["view"]
            await page.answer(consent, "decide-on-my-own")
            seen["first"] = await asking
            seen["same, no click"] = await page_request(wallet, origin, SPEECH, False)
            bigger = changed(expectedCost={"perSession": "5 USD"})
            seen["budget, no click"] = await page_request(wallet, origin, bigger, False)
            seen["waiting after"] = [c for c in await page.consents() if c["origin"] == origin]
            more_languages = copy.deepcopy(SPEECH)
            more_languages["skills"]["audio.transcribe"]["languages"].append("de")
            seen["language, no click"] = await page_request(wallet, origin, more_languages, False)
            asking = asyncio.create_task(page_request(wallet, origin, bigger, True))
            consent = await page.next_consent(origin)
            seen["difference"] = consent["view"]
            await page.answer(consent, "allow")
            seen["budget, clicked"] = await asking
        return seen

    seen = asyncio.run(main())
    assert seen["first"] is not None and seen["same, no click"] is not None
    assert seen["first view"]["limits"] == SPEECH["purpose"]["limits"]
    assert seen["first view"]["cost"] == SPEECH["expectedCost"]
    assert seen["budget, no click"] is None, "more budget without a consent"
    assert seen["waiting after"] == [], "no consent without a click"
    assert seen["language, no click"] is None, "a new language without a consent"
    difference = seen["difference"]
    assert difference["skills"] == [] and difference["alreadyAllowed"] == ["audio.transcribe"]
    assert difference["cost"] == {"perSession": "5 USD"} and difference["more"] == ["budget"]
    assert seen["budget, clicked"] is not None
    outcomes = request_outcomes(wallet, origin, 5)
    refused = [e for e in outcomes if e.get("outcome") == "asks-for-more"]
    assert [e.get("codes") for e in refused] == [["budget"], ["language"]]


def test_an_invalid_manifest_gets_null_no_consent_and_no_decide_on_my_own(
    wallet: Engine,
) -> None:
    origin = "https://invalid.example.org"
    bad = copy.deepcopy(SPEECH)  # one skill it can serve, and two it cannot
    bad["skills"].update({"full.disk.access": {"required": False}, "<script>": {}})
    bad["expectedCost"] = {"perSession": "FREE \u2714 verified"}

    async def main() -> tuple[Any, list[Any], Any]:
        async with visitor(wallet) as page:
            asking = asyncio.create_task(page_request(wallet, origin, bad, True))
            await asyncio.sleep(1.0)
            shown = [c for c in await page.consents() if c["origin"] == origin]
            for consent in shown:  # as the old wallet did: Allow and decide on my own
                await page.answer(consent, "decide-on-my-own")
            first = await asking
            later = await page_request(wallet, origin, SPEECH, False)
        return first, shown, later

    first, shown, later = asyncio.run(main())
    assert first is None and shown == [], "an invalid manifest reached the consent"
    assert later is None, "decide on my own was left on"
    outcomes = [e.get("outcome") for e in request_outcomes(wallet, origin, 2)]
    assert outcomes == ["manifest-invalid", "no-click"], outcomes


def test_a_link_asking_for_more_than_was_allowed_gets_a_consent_of_the_difference(
    wallet: Engine,
) -> None:
    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        runner, _, demo = await start_site(host="localhost")
        try:
            _, link = demo.new_code("127.0.0.1")
            first = (
                await api(
                    wallet, "POST", "/v1/links", {"link": link, "decision": "decide-on-my-own"}
                )
            )[1]
            wider = copy.deepcopy(demo.manifest)
            wider["expectedCost"] = {"perSession": "9 USD"}
            other = build_link(demo.endpoint, encode_manifest(wider), demo.codes.issue())
            async with visitor(wallet) as page:
                asking = asyncio.create_task(
                    api(wallet, "POST", "/v1/links", {"link": other, "decision": "ask"})
                )
                consent = await page.next_consent(first["origin"])
                await page.answer(consent, "decline")
                return first, consent, (await asking)[1]
        finally:
            await demo.close()
            await runner.cleanup()

    first, consent, second = asyncio.run(main())
    assert first["ok"] and first["state"] == "connected", first
    assert consent["view"]["more"] == ["budget"], consent["view"]
    assert consent["view"]["skills"] == []
    assert second["ok"] is False and second["code"] == "declined", second


def test_links_arriving_together_count_against_the_four_at_once(wallet: Engine) -> None:
    manifest64 = encode_manifest(SPEECH)

    async def main() -> list[dict[str, Any]]:
        # eight parties (a consent waits per party); a declined link contacts nobody
        links = [
            build_link(f"wss://game.party{i}.example/byoa", manifest64, "S" * 22 + f"{i:06d}")
            for i in range(8)
        ]
        async with visitor(wallet) as page:
            taking = [
                asyncio.create_task(
                    api(wallet, "POST", "/v1/links", {"link": link, "decision": "ask"})
                )
                for link in links
            ]
            await asyncio.sleep(2.0)
            for consent in await page.consents():
                if consent["kind"] == "link":
                    await page.answer(consent, "decline")
            return [body for _, body in await asyncio.gather(*taking)]

    answers = asyncio.run(main())
    codes = sorted(answer.get("code") for answer in answers)
    assert codes.count("too-many-links") == 4, codes
    assert codes.count("declined") == 4, codes
