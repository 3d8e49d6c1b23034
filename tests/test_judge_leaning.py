"""The judge reads how far its model leans to OUTSIDE from the first token's
log-probabilities where the source gives them: a ``FITS`` the model held nearly as likely to
be ``OUTSIDE`` is ``blocked``; a source that gives none is read by its word; one that refuses
the request for them is asked again without. The wire is checked against a real llama.cpp
server too."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from fake_sources import Recorded, serving
from grants import GEO_MANIFEST
from llama import LlamaServer
from textkit import sources_file

from byoa_skills.judge import JudgeSettings, Opinion, Purpose, judge, read_answer
from byoa_skills.judge.leaning import OUTSIDE_SHARE, TOP_LOGPROBS, leaning, leans_outside
from byoa_skills.runtimes.text import SourceStore, TextCall, TextRuntime

PURPOSE = Purpose.of(GEO_MANIFEST, "https://geo.example")
QUESTION = [{"role": "user", "content": "Name one country in South America."}]


def tokens(**probabilities: float) -> list[tuple[str, float]]:
    return [(token.replace("_", " "), math.log(p)) for token, p in probabilities.items()]


def test_the_leaning_sums_each_word_over_the_tokens_that_begin_it() -> None:
    lean = leaning(tokens(FITS=0.4, _F=0.1, OUT=0.2, outside=0.05, The=0.2))
    assert lean == pytest.approx(math.log(0.25 / 0.5))
    assert leaning(tokens(OUTSIDE=0.3, Yes=0.5)) == math.inf
    assert leaning(tokens(FITS=0.3, Yes=0.5)) == -math.inf
    assert leaning(tokens(Yes=0.9)) is None and leaning(None) is None and leaning([]) is None


def test_a_fits_the_model_held_nearly_as_likely_outside_is_blocked() -> None:
    near = tokens(FITS=0.55, OUTSIDE=0.40)  # OUTSIDE is 0.73 of FITS: at least the share
    far = tokens(FITS=0.85, OUTSIDE=0.10)
    assert leans_outside(near) and not leans_outside(far)
    opinion = read_answer("FITS", design="examples", first_tokens=near)
    assert (opinion.decision, opinion.code) == ("blocked", "purpose-mismatch")
    assert "OUTSIDE 0.73 times as likely as FITS" in opinion.message
    assert (
        read_answer("FITS", design="examples", first_tokens=near, mismatch="ask").decision == "ask"
    )
    assert read_answer("FITS", design="examples", first_tokens=far).decision == "allowed"
    assert read_answer("FITS", design="examples").decision == "allowed"  # none given: the word
    # the rules design's words are read as they are
    assert read_answer("allowed: ok", design="rules", first_tokens=near).decision == "allowed"


def test_the_share_is_a_half() -> None:
    at = tokens(FITS=0.5, OUTSIDE=0.5 * OUTSIDE_SHARE)
    below = tokens(FITS=0.5, OUTSIDE=0.5 * OUTSIDE_SHARE * 0.9)
    assert OUTSIDE_SHARE == 0.5
    assert leans_outside(at) and not leans_outside(below)


# -- through the wire ------------------------------------------------------------------------


def logprob_app(
    recorded: Recorded, top: list[dict[str, Any]] | None, refuse_logprobs: bool = False
) -> web.Application:
    """An OpenAI-wire source answering ``FITS``, with ``top`` as the first token's
    alternatives when asked for them (None: it ignores the ask); with ``refuse_logprobs`` a
    request asking for them gets HTTP 400, as a source that does not know the field."""

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "judge", "object": "model"}]})

    async def chat(request: web.Request) -> web.Response:
        body = await recorded.request(request)
        if refuse_logprobs and "logprobs" in body:
            return web.json_response({"error": {"message": "unknown field logprobs"}}, status=400)
        choice: dict[str, Any] = {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "FITS"},
        }
        if body.get("logprobs") and top is not None:
            choice["logprobs"] = {
                "content": [{"token": "FITS", "logprob": top[0]["logprob"], "top_logprobs": top}]
            }
        return web.json_response(
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 1,
                "model": "judge",
                "choices": [choice],
            }
        )

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    return app


def judged(tmp_path: Path, design: str, **app: Any) -> tuple[Opinion, Recorded]:
    with serving(lambda recorded: logprob_app(recorded, **app)) as server:

        async def run() -> Opinion:
            source = {"name": "src", "kind": "openai", "url": server.url + "/v1"}
            path = sources_file(tmp_path / "s.json", source)
            runtime = TextRuntime(SourceStore(path))
            try:
                settings = JudgeSettings("src/judge", deadline=10, design=design)
                return await judge(PURPOSE, QUESTION, runtime=runtime, settings=settings)
            finally:
                await runtime.close()

        return asyncio.run(run()), server.recorded


NEAR = [
    {"token": "FITS", "logprob": math.log(0.55)},
    {"token": "OUT", "logprob": math.log(0.4)},
    {"token": "The", "logprob": math.log(0.02)},
]


def test_the_judge_asks_for_the_first_tokens_and_blocks_a_fits_that_leans_outside(
    tmp_path: Path,
) -> None:
    opinion, recorded = judged(tmp_path, "examples", top=NEAR)
    (request,) = recorded.requests
    assert request["body"]["logprobs"] is True
    assert request["body"]["top_logprobs"] == TOP_LOGPROBS
    assert (opinion.decision, opinion.code) == ("blocked", "purpose-mismatch")


def test_a_source_that_gives_no_log_probabilities_is_read_by_its_word(tmp_path: Path) -> None:
    opinion, recorded = judged(tmp_path, "examples", top=None)
    assert len(recorded.requests) == 1
    assert (opinion.decision, opinion.code) == ("allowed", "purpose-fits")


def test_a_source_that_refuses_the_ask_is_asked_again_without_it(tmp_path: Path) -> None:
    opinion, recorded = judged(tmp_path, "examples", top=NEAR, refuse_logprobs=True)
    first, second = recorded.requests
    assert "logprobs" in first["body"] and "logprobs" not in second["body"]
    assert second["body"]["messages"] == first["body"]["messages"]
    assert (opinion.decision, opinion.code) == ("allowed", "purpose-fits")


def test_the_rules_design_asks_for_no_log_probabilities(tmp_path: Path) -> None:
    _, recorded = judged(tmp_path, "rules", top=NEAR)
    assert "logprobs" not in recorded.requests[0]["body"]


def test_llama_cpp_gives_the_first_tokens_through_the_runtime(
    tmp_path: Path, llama: LlamaServer
) -> None:
    path = sources_file(
        tmp_path / "llama.json", {"name": "llama", "kind": "openai", "url": llama.url}
    )

    async def run() -> Any:
        runtime = TextRuntime(SourceStore(path))
        try:
            call = TextCall(
                "llama/smollm2",
                [{"role": "user", "content": "Answer FITS."}],
                1,
                temperature=0.0,
                deadline=60,
                top_logprobs=5,
            )
            return await runtime.generate(call)
        finally:
            await runtime.close()

    answer = asyncio.run(run())
    assert answer.first_tokens is not None and 1 <= len(answer.first_tokens) <= 5
    assert all(isinstance(t, str) and p <= 0 for t, p in answer.first_tokens)
    best = max(answer.first_tokens, key=lambda pair: pair[1])[0]
    assert answer.texts[0].startswith(best)  # greedy: the answer is the likeliest token
