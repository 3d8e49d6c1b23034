"""The text runtime against a real OpenAI-compatible server with a real chat model."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from llama import LlamaServer, start_llama
from textkit import ask, code_of, generate, sources_file

from byoa_skills.runtimes.text import SourceStore, TextAnswer, TextCall, TextFailure, TextRuntime

QUESTION = "Name one country in South America."


@pytest.fixture
def sources(tmp_path: Path, llama: LlamaServer) -> Path:
    return sources_file(
        tmp_path / "sources.json", {"name": "llama", "kind": "openai", "url": llama.url}
    )


def test_a_real_model_answers_the_same_at_temperature_zero(sources: Path) -> None:
    first, _ = generate(sources, "llama/smollm2", QUESTION, max_tokens=12, temperature=0)
    again, _ = generate(sources, "llama/smollm2", QUESTION, max_tokens=12, temperature=0)
    assert isinstance(first, TextAnswer) and isinstance(again, TextAnswer), (first, again)
    assert first.texts[0].strip() and first.texts == again.texts
    assert first.provider == "local-model" and first.cost == 0


def test_max_tokens_bounds_the_real_answer(sources: Path) -> None:
    answer, _ = generate(
        sources, "llama/smollm2", "Tell me a long story.", max_tokens=3, temperature=0
    )
    assert isinstance(answer, TextAnswer)
    assert answer.completion_tokens == 3 and answer.finish_reasons == ["length"]


def test_streamed_pieces_make_the_same_text_as_a_whole_answer(sources: Path) -> None:
    whole, _ = generate(sources, "llama/smollm2", QUESTION, max_tokens=16, temperature=0)
    streamed, pieces = generate(
        sources, "llama/smollm2", QUESTION, stream=True, max_tokens=16, temperature=0
    )
    assert isinstance(whole, TextAnswer) and isinstance(streamed, TextAnswer)
    assert len(pieces) > 3
    assert "".join(piece for _, piece in pieces) == streamed.texts[0] == whole.texts[0]


def test_a_model_the_server_does_not_list_is_refused(sources: Path) -> None:
    # llama.cpp's server answers any model name with its own model: the list decides
    answer, _ = generate(sources, "llama/gpt-4o", QUESTION)
    assert code_of(answer) == "unknown-model"


def test_alternatives_are_answered(sources: Path) -> None:
    answer, pieces = generate(
        sources, "llama/smollm2", QUESTION, stream=True, max_tokens=8, choices=2, temperature=1.0
    )
    assert isinstance(answer, TextAnswer) and len(answer.texts) == 2
    for choice in (0, 1):
        assert "".join(p for c, p in pieces if c == choice) == answer.texts[choice]


def test_a_source_that_dies_mid_stream_fails_the_call(tmp_path: Path) -> None:
    server = start_llama(tmp_path / "dying.log")
    path = sources_file(
        tmp_path / "sources.json", {"name": "llama", "kind": "openai", "url": server.url}
    )
    pieces: list[str] = []

    async def run() -> TextAnswer | TextFailure:
        runtime = TextRuntime(SourceStore(path))

        async def on_chunk(choice: int, piece: str) -> None:
            pieces.append(piece)
            if len(pieces) == 2:
                server.process.kill()  # the source crashes while it answers

        try:
            call = TextCall("llama/smollm2", ask("Tell me a long story."), max_tokens=400)
            return await runtime.generate(call, on_chunk)
        except TextFailure as failure:
            return failure
        finally:
            await runtime.close()

    try:
        outcome = asyncio.run(run())
    finally:
        server.stop()
    assert code_of(outcome) == "upstream-failed", outcome
    assert len(pieces) >= 2
