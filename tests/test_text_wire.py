"""The text runtime against loopback servers speaking Ollama's and OpenRouter's formats, and
against sources that are down, slow or break the format."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from engine import free_port
from fake_sources import OPENROUTER_KEY, ollama_app, openrouter_app, serving
from textkit import ask, code_of, generate, sources_file, wait_for

from byoa_skills.runtimes.text import SourceStore, TextAnswer, TextCall, TextRuntime


@pytest.fixture(scope="module")
def ollama():
    with serving(ollama_app) as server:
        yield server


@pytest.fixture(scope="module")
def openrouter():
    with serving(openrouter_app) as server:
        yield server


@pytest.fixture
def sources(tmp_path: Path, ollama: Any, openrouter: Any, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FAKE_OR_KEY", OPENROUTER_KEY)
    return sources_file(
        tmp_path / "sources.json",
        {"name": "ollama", "kind": "ollama", "url": ollama.url, "maxConcurrent": 2},
        {
            "name": "openrouter",
            "kind": "openrouter",
            "url": openrouter.url + "/api/v1",
            "keyEnv": "FAKE_OR_KEY",
        },
        {"name": "gone", "kind": "openai", "url": f"http://127.0.0.1:{free_port()}/v1"},
    )


# -- Ollama ---------------------------------------------------------------------------------


def test_ollama_answers_with_the_model_named_without_its_tag(sources: Path, ollama: Any) -> None:
    answer, _ = generate(sources, "ollama/echo", "red green blue", max_tokens=64)
    assert isinstance(answer, TextAnswer), answer
    assert answer.texts == ["red green blue " * 3]
    assert answer.finish_reasons == ["stop"]
    assert answer.cost == 0 and answer.provider == "local-model"
    sent = ollama.recorded.requests[-1]["body"]
    assert sent["model"] == "echo" and sent["stream"] is False  # Ollama streams by default


def test_ollama_honours_max_tokens_as_num_predict(sources: Path, ollama: Any) -> None:
    answer, _ = generate(sources, "ollama/echo:7b", "one two three four", max_tokens=5)
    assert isinstance(answer, TextAnswer)
    assert answer.texts[0].split() == ["one", "two", "three", "four", "one"]
    assert answer.completion_tokens == 5 and answer.finish_reasons == ["length"]
    assert ollama.recorded.requests[-1]["body"]["options"]["num_predict"] == 5


def test_ollama_streamed_pieces_make_the_final_text(sources: Path) -> None:
    answer, pieces = generate(sources, "ollama/echo", "alpha beta", stream=True, max_tokens=5)
    assert isinstance(answer, TextAnswer)
    assert len(pieces) == 5 and "".join(p for _, p in pieces) == answer.texts[0]


@pytest.mark.parametrize(
    ("directive", "code"),
    [
        ("#fail:http500", "upstream-failed"),
        ("#fail:midstream", "upstream-error"),
        ("#fail:garbage", "upstream-malformed"),
        ("#fail:drop", "upstream-failed"),
    ],
)
@pytest.mark.parametrize("stream", [True, False])
def test_ollama_failures_have_their_codes(
    sources: Path, directive: str, code: str, stream: bool
) -> None:
    answer, _ = generate(sources, "ollama/echo", f"a b c d e {directive}", stream=stream)
    if not stream and directive != "#fail:http500":
        assert isinstance(answer, TextAnswer)  # a whole answer has no middle to fail in
    else:
        assert code_of(answer) == code, answer


def test_an_unknown_model_is_refused_before_any_request(sources: Path, ollama: Any) -> None:
    asked = len(ollama.recorded.requests)
    answer, _ = generate(sources, "ollama/llama3.2", "hi")
    assert code_of(answer) == "unknown-model"
    assert len(ollama.recorded.requests) == asked


# -- OpenRouter ------------------------------------------------------------------------------


def test_openrouter_reports_cost_and_gets_the_attribution_headers(
    sources: Path, openrouter: Any
) -> None:
    answer, pieces = generate(sources, "openrouter/fake/echo-1", "x y", stream=True, max_tokens=4)
    assert isinstance(answer, TextAnswer), answer
    assert answer.texts == ["x y x y "] and "".join(p for _, p in pieces) == answer.texts[0]
    prompt_tokens = 3 + 3  # the fake counts words + 1 per message
    assert answer.cost == Decimal("0.000001") * prompt_tokens + Decimal("0.000002") * 4
    assert answer.provider == "api-key"
    request = openrouter.recorded.requests[-1]
    assert request["headers"]["Authorization"] == f"Bearer {OPENROUTER_KEY}"
    assert request["headers"]["X-Title"] == "byoa-skills"
    assert request["headers"]["HTTP-Referer"].startswith("https://")
    assert request["body"]["usage"] == {"include": True} and request["body"]["max_tokens"] == 4


def test_openrouter_whole_answer_has_its_cost(sources: Path) -> None:
    answer, _ = generate(sources, "openrouter/fake/echo-1", "x y", max_tokens=4)
    assert isinstance(answer, TextAnswer) and answer.cost > 0 and answer.texts == ["x y x y "]


def test_choices_are_separate_answers_whose_costs_add_up(sources: Path) -> None:
    one, _ = generate(sources, "openrouter/fake/echo-1", "p q", max_tokens=3)
    three, pieces = generate(
        sources, "openrouter/fake/echo-1", "p q", stream=True, max_tokens=3, choices=3
    )
    assert isinstance(one, TextAnswer) and isinstance(three, TextAnswer)
    assert three.texts == one.texts * 3 and three.cost == one.cost * 3
    for choice in range(3):
        assert "".join(p for c, p in pieces if c == choice) == three.texts[choice]


@pytest.mark.parametrize(
    ("directive", "code"),
    [
        ("#fail:http500", "upstream-failed"),
        ("#fail:midstream", "upstream-error"),
        ("#fail:garbage", "upstream-malformed"),
        ("#fail:drop", "upstream-failed"),
    ],
)
def test_openrouter_stream_failures_have_their_codes(
    sources: Path, directive: str, code: str
) -> None:
    answer, pieces = generate(
        sources, "openrouter/fake/echo-1", f"a b c d {directive}", stream=True
    )
    assert code_of(answer) == code, answer
    if directive != "#fail:http500":
        assert len(pieces) == 3  # what came before the failure was streamed


def test_a_model_answered_by_another_model_is_refused(sources: Path) -> None:
    for stream in (True, False):
        answer, pieces = generate(sources, "openrouter/fake/shifty", "hi there", stream=stream)
        assert code_of(answer) == "model-mismatch"
        assert pieces == [], "a piece of another model's answer went out"


def test_openrouter_without_the_right_key_is_refused(
    sources: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_OR_KEY", "sk-or-v1-wrong")
    assert code_of(generate(sources, "openrouter/fake/echo-1", "hi")[0]) == "upstream-refused"
    monkeypatch.delenv("FAKE_OR_KEY")
    assert code_of(generate(sources, "openrouter/fake/echo-1", "hi")[0]) == "upstream-refused"


def test_the_estimate_uses_the_listed_prices(sources: Path) -> None:
    async def run() -> tuple[str, Decimal]:
        runtime = TextRuntime(SourceStore(sources))
        try:
            return await runtime.estimate("openrouter/fake/echo-1", 100, 50, 2)
        finally:
            await runtime.close()

    kind, cost = asyncio.run(run())
    assert kind == "api-key"
    assert cost == (Decimal("0.000001") * 100 + Decimal("0.000002") * 50) * 2


# -- down, slow, bounded ------------------------------------------------------------------------


def test_a_source_that_is_down_is_reported_as_down(sources: Path) -> None:
    assert code_of(generate(sources, "gone/any-model", "hi")[0]) == "source-down"


@pytest.mark.parametrize(
    ("model", "code"),
    [("nowhere/m", "unknown-source"), ("ollama", "unknown-source"), (None, "model-required")],
)
def test_models_that_name_no_source_are_refused(sources: Path, model: Any, code: str) -> None:
    assert code_of(generate(sources, model, "hi")[0]) == code


def test_the_deadline_cancels_the_upstream_request(sources: Path, ollama: Any) -> None:
    answer, pieces = generate(
        sources, "ollama/echo", "w " * 20 + "#slow:0.1", stream=True, deadline=0.5
    )
    assert code_of(answer) == "deadline-exceeded"
    assert 0 < len(pieces) < 60
    assert wait_for(lambda: ollama.recorded.running == 0)
    assert ollama.recorded.cancelled >= 1


def test_a_source_never_has_more_requests_than_its_bound(sources: Path, ollama: Any) -> None:
    async def run() -> list[Any]:
        runtime = TextRuntime(SourceStore(sources))
        call = TextCall("ollama/echo", ask("a b #slow:0.02"), max_tokens=6)
        try:
            return await asyncio.gather(*(runtime.generate(call) for _ in range(6)))
        finally:
            await runtime.close()

    ollama.recorded.peak = 0
    answers = asyncio.run(run())
    assert all(answer.texts == ["a b a b a b "] for answer in answers)
    assert ollama.recorded.peak == 2  # maxConcurrent of this source
