"""``byoa-bench judge``'s own parts: the judge's model and design come from the command line,
and the "prefix broken" mode gives every judge prompt a head of its own."""

from __future__ import annotations

import asyncio
from typing import Any

from grants import GEO_MANIFEST

from byoa_skills.bench.cli import parser
from byoa_skills.bench.context import settings_for
from byoa_skills.bench.scenarios.judge import MODES, _Unshared
from byoa_skills.judge import JudgeSettings, Purpose, judge
from byoa_skills.runtimes.text import TextAnswer, TextCall

PURPOSE = Purpose.of(GEO_MANIFEST, "https://geo.example")


class Recording:
    """A text runtime that records the prompts and answers FITS."""

    def __init__(self) -> None:
        self.prompts: list[list[dict[str, str]]] = []

    async def generate(self, call: TextCall, on_chunk: Any = None) -> TextAnswer:
        self.prompts.append(call.messages)
        return TextAnswer(["FITS"], 0, "local-model", "judge/model", 1, ["stop"], None)  # type: ignore[arg-type]


def test_the_judge_model_and_design_come_from_the_command_line() -> None:
    args = parser().parse_args(
        ["judge", "--judge-model", "qwen2.5-coder-1.5b", "--judge-design", "examples"]
    )
    settings = settings_for(
        args.quick, args.model, "cpu", judge_model=args.judge_model, judge_design=args.judge_design
    )
    assert (settings.judge_model, settings.judge_design) == ("qwen2.5-coder-1.5b", "examples")
    default = settings_for(False, "base", "cpu")
    assert (default.judge_model, default.judge_design) == ("smollm2", None)


def text(prompt: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in prompt)


def test_the_broken_prefix_mode_shares_no_prefix_and_the_plain_one_does() -> None:
    assert "before-own-unshared" in MODES and "before-own" in MODES
    runtime = Recording()
    settings = JudgeSettings("judge/model", design="examples")

    async def run() -> None:
        for question in ("Capital of Peru?", "Flag of Japan?"):
            messages = [{"role": "user", "content": question}]
            await judge(PURPOSE, messages, runtime=runtime, settings=settings)  # type: ignore[arg-type]
            await judge(
                PURPOSE,
                messages,
                runtime=_Unshared(runtime, question),  # type: ignore[arg-type]
                settings=settings,
            )

    asyncio.run(run())
    shared, unshared_one, plain_two, unshared_two = (text(p) for p in runtime.prompts)
    assert shared[:2000] == plain_two[:2000]  # the fixed part: the same first characters
    assert unshared_one[:20] != unshared_two[:20]  # each broken prompt differs from its start
    assert unshared_one.endswith(shared[-200:])  # the same prompt beneath its own head


def judge_entry() -> dict[str, Any]:
    """A judge scenario's figures (made up) as its run writes them."""
    p50 = {
        "off": 1000.0,
        "beside-same": 4000.0,
        "before-same": 3000.0,
        "beside-own": 1200.0,
        "before-own": 2000.0,
        "before-own-unshared": 9000.0,
    }
    return {
        "status": "ok",
        "title": "judge",
        "model": "qwen2.5-coder-1.5b",
        "design": "examples",
        "rounds": 2,
        "max_tokens": 64,
        "goal_added_p50_share": 0.3,
        "modes": {mode: {"p50": ms, "p95": ms * 1.5} for mode, ms in p50.items()},
        "answers_differing_from_off": {mode: 0 for mode in MODES if mode != "off"},
        "added_p50_share": {mode: ms / 1000.0 - 1 for mode, ms in p50.items() if mode != "off"},
        "shared_prefix_saves_p50_ms": 7000.0,
        "goal_met": {"same source": False, "own source": True},
    }


def test_the_report_and_the_printed_table_give_every_mode_and_the_goal() -> None:
    from byoa_skills.bench import report

    lines = report._scenario_lines("judge", judge_entry())
    rows = [line for line in lines if line.startswith("| ") and "ms" not in line.split("|")[1]]
    assert len(rows) == 1 + len(MODES)  # the head, then a row per mode
    assert "| before the call, own server, prefix broken | 9,000 | 13,500 | +8,000 ms" in "\n".join(
        lines
    )
    assert "saves 7,000 ms" in lines[-1] and "same server not met, own server met" in lines[-1]
    (table,) = report.tables({"scenarios": {"judge": judge_entry()}})
    assert table.row_count == len(MODES) and "qwen2.5-coder-1.5b" in str(table.caption)
    run = {
        "headline": {},
        "scenarios": {"judge": judge_entry()},
        "started": "now",
        "seconds": 1.0,
        "settings": {"quick": True, "model": "base"},
        "machine": {
            "cpu": "cpu",
            "cores": 2,
            "memory_mib": 1024,
            "gpu": {"cuda_devices": 0},
            "libraries": {},
        },
    }
    assert report.NO_HEADLINE in report.markdown(run)
