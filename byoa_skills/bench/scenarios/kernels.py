"""``kernels``: CTranslate2's CPU kernels on this machine, each candidate's decode time and
whether its words held, and the set the engine's workers then decode with.

The measurement is :func:`byoa_skills.runtimes.speech.ct2_kernels.measure`, made afresh and
kept where the engine's workers read it, so the scenarios after this one run the choice it
prints (and the engine's first start does not measure). Where ``$BYOA_SKILLS_CT2_KERNELS`` or
the user's ``CT2_*`` variables force the kernels, the candidates are measured all the same and
the row the engine runs is the forced one. Each figure is from this run.
"""

from __future__ import annotations

from typing import Any

from byoa_skills.bench.context import Context, Skip
from byoa_skills.bench.machine import cpu_model
from byoa_skills.runtimes.speech import ct2_kernels
from byoa_skills.runtimes.speech.encoder_choice import cpu_flags

NAME = "kernels"
TITLE = "CTranslate2's CPU kernels"


def run(ctx: Context) -> dict[str, Any]:
    """Each candidate's decode ms (its clips, beam 5, one thread), its ratio to CTranslate2's
    own pick and whether its words held; the choice and why."""
    if ctx.settings.device != "cpu":
        raise Skip("CTranslate2's CPU kernels: the run is not on the CPU")
    flags = cpu_flags()
    if not ct2_kernels.candidates(flags):
        raise Skip("no AVX2: CTranslate2's own pick is the only one")
    ctx.reporter.start(NAME, 1)
    ctx.reporter.step("each candidate in a process of its own")
    choice = ct2_kernels.kernels_for(ctx.model_dir, measure_again=True)
    figures = choice.figures or ct2_kernels.measure(ctx.model_dir, flags).figures  # forced
    ctx.reporter.advance()
    own = next((k for k, f in figures.items() if f["ctranslate2_own"]), None)
    own_ms = figures[own]["decode_ms"] if own else None
    candidates = {
        label: {
            **figure,
            "vs_own": figure["decode_ms"] / own_ms if own_ms and figure["decode_ms"] else None,
        }
        for label, figure in figures.items()
    }
    return {
        "chosen": choice.label,
        "reason": choice.reason,
        "own": own,
        "candidates": candidates,
        "cpu": cpu_model(),
        "clips": ct2_kernels.CLIPS,
        "repeats": ct2_kernels.REPEATS,
        "rounds": ct2_kernels.ROUNDS,
        "beams": ct2_kernels.BEAMS,
        "margin": ct2_kernels.MARGIN,
    }


def table_head(entry: dict[str, Any]) -> list[str]:
    """The column names of :func:`table_rows`."""
    return ["kernels", "decode ms, each round", "x CTranslate2's own", "same words", "runs"]


def table_rows(entry: dict[str, Any]) -> list[list[str]]:
    """One row per candidate: its decode ms, its ratio to CTranslate2's own pick, whether
    its words held, and which one the engine runs."""
    chosen = entry["own"] if entry["chosen"] == "ctranslate2" else entry["chosen"]
    rows = []
    for label, figure in entry["candidates"].items():
        mark = " (CTranslate2's own)" if label == entry["own"] else ""
        ratio = figure.get("vs_own")
        rows.append(
            [
                label + mark,
                " / ".join(_ms(ms) for ms in figure.get("rounds_ms", [figure["decode_ms"]])),
                "-" if ratio is None else f"{ratio:.2f}",
                "yes" if figure["same_words"] else "no",
                "yes" if label == chosen else "",
            ]
        )
    return rows


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def summary_line(entry: dict[str, Any]) -> str:
    """The CPU, what was decoded, and the choice with why, in one sentence."""
    return (
        f"{entry['cpu'] or 'This CPU'}: {entry['clips']} calibration clips, whole window, beam "
        f"{entry['beams']}, one thread, median of {entry['repeats']}, "
        f"{entry.get('rounds', 1)} rounds. Chosen: {entry['chosen']} ({entry['reason']}; "
        f"another must be {entry['margin']:.0%} faster in every round with the same words)."
    )
