"""What a consent shows of a site's text and host: hidden characters made visible, and a host
that mixes scripts headed by its ``xn--`` form with a warning."""

from __future__ import annotations

import copy

import pytest
from grants import GEO_MANIFEST

from byoa_skills.consent.desk import call_view, origin_view, site_view
from byoa_skills.consent.shown_text import (
    HIDDEN_WARNING,
    MIXED_WARNING,
    UNREADABLE_WARNING,
    hidden,
    judge_host,
    one_script,
    script_of,
    shown,
)

RLO = "\u202e"


@pytest.mark.parametrize(
    "char",
    [
        "\u202a",
        "\u202b",
        "\u202c",
        "\u202d",
        "\u202e",
        "\u2066",
        "\u2067",
        "\u2068",
        "\u2069",
        "\u200e",
        "\u200f",
        "\u061c",
        "\u200b",
        "\u200c",
        "\u200d",
        "\u2060",
        "\ufeff",
        "\u00ad",
        "\x00",
        "\x1b",
        "\r",
        "\x7f",
        "\u0085",
        "\u2028",
        "\u2029",
        "\ud800",
        "\ue000",
        "\U000e0041",
        "\u3164",
        "\ufe0f",
        "\u034f",
        "\U000e0100",
    ],
)
def test_every_bidi_control_and_invisible_character_is_shown_as_a_marker(char: str) -> None:
    assert hidden(char)
    assert shown(f"a{char}b") == f"a⟨U+{ord(char):04X}⟩b"


def test_a_reversed_text_is_shown_in_the_order_it_holds() -> None:
    assert shown(RLO + "SEY kcilc") == "⟨U+202E⟩SEY kcilc"
    assert shown("ok\u2066\u2069") == "ok⟨U+2066⟩⟨U+2069⟩"


def test_ordinary_text_of_every_script_line_breaks_and_tabs_are_kept() -> None:
    for text in (
        "Family geography game",
        "Игра о странах",  # noqa: RUF001
        "国の名前ゲーム",
        "لعبة البلدان",
        "משחק",
        "two\nlines\tand a tab",
        "naïve café",
        "0.05 USD",
    ):
        assert shown(text) == text


@pytest.mark.parametrize(
    ("host", "heading", "unicode", "warning"),
    [
        ("xn--pypal-4ve.com", "xn--pypal-4ve.com", "p\u0430ypal.com", MIXED_WARNING),
        (
            "xn--80ak6aa92e.com",
            "xn--80ak6aa92e.com",
            "\u0430\u0440\u0440\u04cf\u0435.com",
            MIXED_WARNING,
        ),  # an all-Cyrillic look-alike of a Latin name: Cyrillic with .com
        ("xn--e1afmkfd.com", "xn--e1afmkfd.com", "пример.com", MIXED_WARNING),
        ("xn--n3h.example", "xn--n3h.example", "☃.example", MIXED_WARNING),  # not a letter
        ("xn--e1afmkfd.xn--p1ai", "пример.рф", "пример.рф", None),  # Cyrillic alone
        ("xn--r8jz45g.jp", "例え.jp", "例え.jp", None),  # Han, Hiragana and Latin: Japanese
        ("xn--bcher-kva.example", "bücher.example", "bücher.example", None),  # Latin alone
        ("paypal.com", "paypal.com", "paypal.com", None),
        ("127.0.0.1", "127.0.0.1", "127.0.0.1", None),
        ("[::1]", "[::1]", "[::1]", None),
        (
            "xn--99999999999.example",
            "xn--99999999999.example",
            "xn--99999999999.example",
            UNREADABLE_WARNING,
        ),
        ("a\u200bb.example", "a⟨U+200B⟩b.example", "a⟨U+200B⟩b.example", HIDDEN_WARNING),
    ],
    ids=[
        "latin-with-cyrillic-a",
        "cyrillic-apple",
        "cyrillic-dot-com",
        "symbol",
        "cyrillic-only",
        "japanese",
        "latin-accent",
        "ascii",
        "ipv4",
        "ipv6",
        "bad-punycode",
        "zero-width",
    ],
)
def test_a_host_is_headed_in_unicode_only_when_its_letters_are_in_one_script(
    host: str, heading: str, unicode: str, warning: str | None
) -> None:
    judged = judge_host(host)
    assert (judged.heading, judged.unicode, judged.warning) == (heading, unicode, warning)


def test_scripts_come_from_the_characters_names() -> None:
    assert [script_of(c) for c in "aаαא例えアー1-\u0301ʼ"] == [  # noqa: RUF001
        "LATIN",
        "CYRILLIC",
        "GREEK",
        "HEBREW",
        "HAN",
        "HIRAGANA",
        "KATAKANA",
        "KATAKANA",
        "Common",
        "Common",
        "Common",
        "Unknown",
    ]
    assert one_script("bücher-2") and one_script("例えjp") and one_script("한국어abc")
    assert not one_script("pаypal") and not one_script("αβγabc") and not one_script("例え한")  # noqa: RUF001


def test_the_views_show_every_manifest_text_with_its_hidden_characters_visible() -> None:
    manifest = copy.deepcopy(GEO_MANIFEST)
    manifest["purpose"]["summary"] = RLO + "SEY kcilc"
    manifest["purpose"]["limits"] = {"max\u200bCalls": "4\u2066", "maxClipSeconds": 15}
    manifest["skills"]["audio.transcribe"]["languages"] = ["en", "r\u202eu"]
    manifest["privacy"] = "personal\u200d-voice"
    manifest["expectedCost"] = {"per\u2060Session": "0.05\ufeff USD"}
    view = site_view("https://xn--pypal-4ve.com", manifest)
    assert view["purpose"] == "⟨U+202E⟩SEY kcilc"
    assert view["limits"] == {"max⟨U+200B⟩Calls": "4⟨U+2066⟩", "maxClipSeconds": 15}
    assert view["skills"][0]["languages"] == ["en", "r⟨U+202E⟩u"]
    assert view["privacy"] == "personal⟨U+200D⟩-voice"
    assert view["cost"] == {"per⟨U+2060⟩Session": "0.05⟨U+FEFF⟩ USD"}
    assert (view["headingHost"], view["hostWarning"]) == ("xn--pypal-4ve.com", MIXED_WARNING)
    call = {"skill": "text.generate", "estimatedCost": "0.1" + RLO, "input": {"textChars": 3}}
    reasons = [{"code": "budget-exceeded", "decision": "ask", "message": "over" + RLO}]
    asked = call_view("https://xn--pypal-4ve.com", call, reasons)
    assert asked["estimatedCost"] == "0.1⟨U+202E⟩"
    assert asked["reasons"] == [{"code": "budget-exceeded", "message": "over⟨U+202E⟩"}]
    assert asked["headingHost"] == "xn--pypal-4ve.com"
    assert origin_view("https://xn--e1afmkfd.xn--p1ai:8443")["headingHost"] == "пример.рф"
