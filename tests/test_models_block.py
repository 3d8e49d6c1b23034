"""The models block, the visitor's ticks and limits, and a live grant made stricter: their
checks and codes (docs/models-block.md), without a server."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from grants import GEO_MANIFEST

from byoa_skills.consent.allow import allow_grant
from byoa_skills.consent.scope import manifest_problems
from byoa_skills.wallet_shim.grant_change import changed_grant
from byoa_skills.wallet_shim.grants import build_grant
from byoa_skills.wallet_shim.models_block import (
    ModelsBlock,
    block_problems,
    company_of,
    fallback_ticks,
    offered,
    preticked,
    read_block,
    tick_problems,
)
from byoa_skills.wallet_shim.visitor_choices import (
    ChoiceRefusal,
    VisitorChoices,
    ceiling,
    choice_problems,
    read_choices,
)

BLOCK = {
    "count": 2,
    "required": 1,
    "differentCompanies": True,
    "why": "two answers compared",
    "prefer": ["llama", "qwen"],
}


def text_manifest(block: Any = BLOCK, **limits: Any) -> dict[str, Any]:
    manifest = copy.deepcopy(GEO_MANIFEST)
    manifest["skills"]["text.generate"] = {"required": True, "models": block}
    manifest["purpose"]["limits"] = {**manifest["purpose"].get("limits", {}), **limits}
    return manifest


def test_a_well_formed_block_passes_every_check() -> None:
    assert block_problems(text_manifest()) == []
    assert manifest_problems(text_manifest()) == []
    assert read_block(text_manifest()) == ModelsBlock(
        2, 1, True, "two answers compared", ("llama", "qwen")
    )


@pytest.mark.parametrize(
    ("block", "path"),
    [
        ("two", ""),
        ({**BLOCK, "count": 0}, "/count"),
        ({**BLOCK, "count": 9}, "/count"),
        ({**BLOCK, "count": True}, "/count"),
        ({**BLOCK, "required": 3}, "/required"),
        ({**BLOCK, "differentCompanies": "yes"}, "/differentCompanies"),
        ({key: v for key, v in BLOCK.items() if key != "why"}, "/why"),
        ({**BLOCK, "why": " "}, "/why"),
        ({**BLOCK, "why": "x" * 301}, "/why"),
        ({**BLOCK, "prefer": "llama"}, "/prefer"),
        ({**BLOCK, "prefer": ["llama", ""]}, "/prefer/1"),
        ({**BLOCK, "vendor": "meta"}, "/vendor"),
    ],
)
def test_a_malformed_block_is_refused_with_its_code_and_pointer(block: Any, path: str) -> None:
    problems = manifest_problems(text_manifest(block))
    assert {"code": "models-invalid", "path": "/skills/text.generate/models" + path} in [
        {"code": p["code"], "path": p["path"]} for p in problems
    ], problems


def test_a_block_on_the_speech_skill_is_refused() -> None:
    manifest = copy.deepcopy(GEO_MANIFEST)
    manifest["skills"]["audio.transcribe"]["models"] = BLOCK
    (problem,) = manifest_problems(manifest)
    assert (problem["code"], problem["path"]) == (
        "models-not-for-skill",
        "/skills/audio.transcribe/models",
    )


def test_a_text_skill_without_a_block_asks_for_one_model() -> None:
    manifest = copy.deepcopy(GEO_MANIFEST)
    manifest["skills"]["text.generate"] = {"required": True}
    assert read_block(manifest) == ModelsBlock(count=1, required=1)
    manifest["skills"]["text.generate"] = {"required": False}
    assert read_block(manifest) == ModelsBlock(count=1, required=0)


def test_the_company_is_what_the_name_says() -> None:
    assert company_of("llama-3.2-3b-instruct") == "Meta"
    assert company_of("meta-llama/llama-3.1-8b-instruct") == "Meta"
    assert company_of("qwen2.5:7b") == "Alibaba"
    assert company_of("mistralai/mixtral-8x7b") == "Mistral AI"
    assert company_of("SmolLM2-135M-Instruct") == "Hugging Face"
    assert company_of("my-own-finetune") is None


MODELS = [
    offered("lab", "qwen2.5-7b"),
    offered("lab", "qwen2.5-14b"),
    offered("home", "llama3.2:3b"),
    offered("home", "my-finetune"),
]


def test_ticks_are_checked_against_the_block() -> None:
    block = read_block(text_manifest())
    assert block is not None
    qwen, qwen_big, llama, own = MODELS
    assert tick_problems(block, [qwen, llama]) == []
    assert tick_problems(block, [qwen, own]) == []  # a name that says no company is its own
    codes = {p["code"] for p in tick_problems(block, [qwen, qwen_big])}
    assert codes == {"same-company"}
    assert {p["code"] for p in tick_problems(block, [])} == {"too-few-models"}
    assert {p["code"] for p in tick_problems(block, [qwen, llama, own])} == {"too-many-models"}
    assert "model-ticked-twice" in {p["code"] for p in tick_problems(block, [qwen, qwen])}


def test_only_what_the_site_prefers_is_ticked_for_the_visitor() -> None:
    block = read_block(text_manifest())
    assert block is not None
    assert [m.ref for m in preticked(block, MODELS)] == ["home/llama3.2:3b", "lab/qwen2.5-7b"]
    assert preticked(ModelsBlock(count=1, required=1), MODELS) == []
    fallback = fallback_ticks(
        ModelsBlock(count=2, required=2, different_companies=True),
        MODELS,
        default="lab/qwen2.5-14b",
    )
    assert [m.ref for m in fallback] == ["lab/qwen2.5-14b", "home/llama3.2:3b"]


def test_the_visitor_may_only_make_limits_stricter() -> None:
    manifest = text_manifest(maxCallsPerMinute=20)
    choices = read_choices({"limits": {"maxCallsPerMinute": 5, "maxParallelCalls": 2}})
    assert choice_problems(manifest, choices, latest_expiry_minutes=1440, currency="USD") == []
    wider = read_choices({"limits": {"maxCallsPerMinute": 21, "maxParallelCalls": 9}})
    problems = choice_problems(manifest, wider, latest_expiry_minutes=1440, currency="USD")
    assert [(p["code"], p["path"]) for p in problems] == [
        ("limit-wider", "/limits/maxCallsPerMinute"),
        ("limit-wider", "/limits/maxParallelCalls"),
    ]
    assert ceiling(manifest, "maxCallSeconds") == 120
    later = read_choices({"expiresInMinutes": 61, "budget": "1 EUR"})
    found = choice_problems(manifest, later, latest_expiry_minutes=60, currency="USD")
    codes = [p["code"] for p in found]
    assert codes == ["budget-invalid", "expiry-later"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"limits": {"maxCallsPerMinute": "5"}}, "limit-invalid"),
        ({"limits": {"maxCallsPerMinute": 0}}, "limit-invalid"),
        ({"limits": {"maxCallsPerMinute": 2.5}}, "limit-invalid"),
        ({"limits": {"maxTokensPerDay": 5}}, "unknown-limit"),
        ({"budget": "lots"}, "budget-invalid"),
        ({"budget": "-1 USD"}, "budget-invalid"),
        ({"expiresInMinutes": 0}, "expiry-invalid"),
        ({"models": "m1"}, "choices-invalid"),
        ({"colour": "red"}, "choices-invalid"),
        ([], "choices-invalid"),
    ],
)
def test_choices_of_the_wrong_form_are_refused(body: Any, code: str) -> None:
    with pytest.raises(ChoiceRefusal) as refused:
        read_choices(body)
    assert refused.value.code == code


def test_a_live_grant_is_made_stricter_and_keeps_its_model_codes() -> None:
    manifest = text_manifest(maxCallsPerMinute=20)
    given = allow_grant(
        manifest,
        ["audio.transcribe", "text.generate"],
        0,
        choices=VisitorChoices(limits={"maxParallelCalls": 4}),
        models={"m1": "lab/qwen2.5-7b", "m2": "home/llama3.2:3b"},
    )
    live = build_grant("https://geo.example.org", manifest, given, 0)
    assert live.rate_limit == 20 and live.limits.max_parallel_calls == 4
    choices = read_choices(
        {
            "limits": {"maxCallsPerMinute": 3, "maxParallelCalls": None},
            "models": ["m2"],
            "expiresInMinutes": 30,
        }
    )
    changed = build_grant(live.origin, manifest, changed_grant(live, choices, 0), 0, live.id)
    live.take_terms_of(changed)
    assert live.rate_limit == 3 and live.limits.max_parallel_calls == 8
    assert live.models == {"m2": "home/llama3.2:3b"}
    assert live.expires_ms == 30 * 60_000
    assert live.summary()["models"] == ["m2"]
    for refused, code in (
        ({"limits": {"maxCallsPerMinute": 40}}, "limit-wider"),
        ({"models": ["m1"]}, "model-not-granted"),
        ({"expiresInMinutes": 31}, "expiry-later"),
    ):
        with pytest.raises(ChoiceRefusal) as caught:
            changed_grant(live, read_choices(refused), 0)
        assert caught.value.code == code


def test_an_allow_gives_the_visitors_budget_expiry_and_limits() -> None:
    manifest = text_manifest()
    given = allow_grant(
        manifest,
        ["text.generate"],
        0,
        models={"m1": "lab/qwen2.5-7b"},
        choices=read_choices(
            {"budget": "0.01 USD", "expiresInMinutes": 10, "limits": {"maxTextChars": 500}}
        ),
    )
    assert given["budget"] == {"perSession": "0.01 USD"}
    assert given["expiresAt"] == "1970-01-01T00:10:00.000Z"
    assert given["limits"] == {"maxTextChars": 500}
    assert given["models"] == {"m1": "lab/qwen2.5-7b"}
    assert build_grant("https://geo.example.org", manifest, given, 0).terms.max_text_chars == 500


def test_a_site_that_asks_for_more_models_sees_only_that_difference() -> None:
    from byoa_skills.consent.offer import Offer, asks_models, offer_view
    from byoa_skills.consent.scope import Scope, more_than

    held = text_manifest({**BLOCK, "count": 1, "required": 1})
    asked = text_manifest()
    skills = ["audio.transcribe", "text.generate"]
    more = more_than(Scope.of(held), asked)
    assert more.models == ("text.generate",) and not more.skills
    offer = Offer("https://geo.example.org", asked, skills, read_block(asked), MODELS)
    view = offer_view(offer, more)
    assert asks_models(offer, more) and view["models"]["count"] == 2
    assert [s["skill"] for s in view["skills"]] == ["text.generate"]
    same = more_than(Scope.of(asked), asked)
    assert not same and not asks_models(offer, same)
