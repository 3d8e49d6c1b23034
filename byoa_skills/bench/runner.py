"""Runs the chosen scenarios in order and gathers one results document."""

from __future__ import annotations

import datetime
import os
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from byoa_skills.bench.clips import load_clips, real_groups
from byoa_skills.bench.context import Context, Reporter, Settings, Skip, make_home
from byoa_skills.bench.headline import headline
from byoa_skills.bench.machine import available_cores, decode_options, machine_facts, model_facts
from byoa_skills.bench.scenarios import SCENARIOS

SCHEMA = 1


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when CTranslate2 can compute on a GPU (it is tried), else ``cpu``."""
    from byoa_skills.runtimes.speech.devices import resolve_device as resolve

    return resolve(device, "ct2")


def prepare(settings: Settings, reporter: Reporter, home: Path | None = None) -> Context:
    """A run's context: a temporary ``BYOA_SKILLS_HOME`` whose cache holds the model
    (assembled from its verified source by ``ensure_model``), the clips, the cores."""
    from byoa_skills.models import ensure_model
    from byoa_skills.pool.tuned import layout_path

    user_layout = layout_path()  # the user's config, before the run's home replaces it
    home = home or make_home()
    os.environ["BYOA_SKILLS_HOME"] = str(home)
    model_dir = ensure_model(settings.model, cache_dir=home / "cache" / "models")
    clips, source = load_clips()
    real = real_groups(settings.quick, english_only=settings.model.endswith(".en"))
    clips |= {clip.key: clip.samples for group in real.values() for clip in group}
    return Context(
        settings,
        clips,
        source,
        home,
        Path(model_dir),
        available_cores(),
        reporter,
        layout_path=user_layout,
        real=real,
    )


def run_scenarios(ctx: Context, selected: Sequence[str]) -> dict[str, Any]:
    """Run ``selected`` (in run order) and return the results document."""
    began = time.perf_counter()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    try:
        for name, module in SCENARIOS.items():
            if name not in selected:
                continue
            scenario_began = time.perf_counter()
            try:
                figures = module.run(ctx)
                entry: dict[str, Any] = {"status": "ok", **figures}
            except Skip as skip:
                entry = {"status": "skipped", "reason": str(skip)}
                ctx.reporter.note(f"{name}: skipped: {skip}")
            except Exception as error:  # one failed scenario must not lose the others
                entry = {
                    "status": "failed",
                    "reason": f"{type(error).__name__}: {error}",
                    "traceback": traceback.format_exc(),
                }
                ctx.reporter.note(f"{name}: failed: {error}")
            entry["seconds"] = round(time.perf_counter() - scenario_began, 2)
            entry["title"] = module.TITLE
            ctx.results[name] = entry
            ctx.reporter.finish(name, entry["status"])
    finally:
        ctx.close()
    results: dict[str, Any] = {
        "schema": SCHEMA,
        "started": started,
        "seconds": round(time.perf_counter() - began, 1),
        "settings": ctx.settings.to_dict(),
        "machine": machine_facts(),
        "model": model_facts(ctx.settings.model),
        "decode_options": decode_options(),
        "clips": {
            "source": ctx.clip_source,
            "seconds": {label: len(s) / 16000 for label, s in ctx.clips.items()},
            "real": {
                group: [
                    {
                        "key": c.key,
                        "source": c.source,
                        "language": c.language,
                        "seconds": round(c.seconds, 3),
                    }
                    for c in clips
                ]
                for group, clips in ctx.real.items()
            },
        },
        "engine_layout": {"workers": ctx.workers, "threads": 1},
        "scenarios": ctx.results,
    }
    results["headline"] = headline(results)
    return results
