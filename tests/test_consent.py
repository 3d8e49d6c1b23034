"""The consent desk and what a consent shows, without a browser."""

from __future__ import annotations

import asyncio
import copy

from grants import GEO_MANIFEST

from byoa_skills.consent.desk import (
    NO_ANSWER,
    ConsentDesk,
    call_view,
    consent_seconds,
    origin_view,
    site_view,
)


def test_an_international_host_is_shown_in_unicode_beside_its_punycode() -> None:
    view = origin_view("https://xn--bcher-kva.example:8443")
    assert view == {
        "origin": "https://xn--bcher-kva.example:8443",
        "host": "xn--bcher-kva.example",
        "unicodeHost": "bücher.example",
        "headingHost": "bücher.example",
        "hostWarning": None,
    }
    assert origin_view("http://localhost:8080")["unicodeHost"] == "localhost"
    broken = "xn--99999999999.example"  # not valid punycode: shown as written
    assert origin_view(f"https://{broken}")["unicodeHost"] == broken


def test_a_site_that_holds_a_grant_sees_only_the_difference() -> None:
    view = site_view("https://geo.example.org", GEO_MANIFEST, held=["audio.transcribe"])
    assert [skill["skill"] for skill in view["skills"]] == ["text.generate"]
    assert view["alreadyAllowed"] == ["audio.transcribe"]
    first = site_view("https://geo.example.org", GEO_MANIFEST)
    assert first["skills"][0] == {
        "skill": "audio.transcribe",
        "languages": ["en", "ru", "sk"],
        "required": True,
    }
    assert first["purpose"] == GEO_MANIFEST["purpose"]["summary"]
    assert first["limits"] == {"maxClipSeconds": 15, "maxCallsPerMinute": 40}
    assert first["cost"] == {"perSession": "0.05 USD"}


def test_odd_manifest_values_become_plain_text_and_numbers() -> None:
    odd = copy.deepcopy(GEO_MANIFEST)
    odd["purpose"]["limits"]["nested"] = {"a": 1}
    odd["skills"]["audio.transcribe"]["languages"] = "en"
    view = site_view("https://geo.example.org", odd)
    assert "nested" not in view["limits"]
    assert view["skills"][0]["languages"] == []


def test_a_call_ask_shows_the_gates_reasons() -> None:
    call = {
        "skill": "text.generate",
        "estimatedCost": "0.1 USD",
        "input": {"clipSeconds": 0, "textChars": 12},
    }
    reasons = [
        {"code": "budget-exceeded", "decision": "ask", "message": "over the budget"},
        {"code": "fine", "decision": "allowed", "message": "-"},
    ]
    view = call_view("https://geo.example.org", call, reasons)
    assert view["measured"] == {"textChars": 12}
    assert view["reasons"] == [{"code": "budget-exceeded", "message": "over the budget"}]


def test_the_desk_takes_one_answer_and_a_silence_is_a_decline() -> None:
    heard: list[tuple[str, str]] = []

    async def main() -> tuple[str, str, bool, bool]:
        desk = ConsentDesk(seconds=0.2)
        desk.listen(lambda event, consent: heard.append((event, consent.kind)))
        waiting = asyncio.create_task(desk.ask("link", "https://a.example", {}))
        await asyncio.sleep(0.05)
        [consent] = desk.waiting()
        refused = desk.answer(consent.id, "maybe")  # not an answer
        taken = desk.answer(consent.id, "allow")
        answered = await waiting
        silent = await desk.ask("link", "https://b.example", {})
        return answered, silent, refused, taken

    answered, silent, refused, taken = asyncio.run(main())
    assert (answered, silent, refused, taken) == ("allow", NO_ANSWER, False, True)
    assert heard == [("consent", "link"), ("consent-closed", "link")] * 2


def test_the_wait_comes_from_the_environment_within_bounds(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("BYOA_WALLET_CONSENT_SECONDS", "7.5")
    assert consent_seconds() == 7.5
    for bad in ("0", "-3", "soon", "99999"):
        monkeypatch.setenv("BYOA_WALLET_CONSENT_SECONDS", bad)
        assert consent_seconds() == 120
