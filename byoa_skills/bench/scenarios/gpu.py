"""``gpu``: the ``engine`` scenario with ``--device cuda``, when a GPU answers."""

from __future__ import annotations

from typing import Any

from byoa_skills.bench.context import Context, Skip
from byoa_skills.bench.machine import gpu_info
from byoa_skills.bench.scenarios import enginerun

NAME = "gpu"
TITLE = "Engine on CUDA"


def run(ctx: Context) -> dict[str, Any]:
    """The engine's figures with one CUDA worker; skipped without a GPU."""
    info = gpu_info()
    if info["cuda_devices"] < 1:
        reason = info.get("error") or "CTranslate2 sees no CUDA device"
        raise Skip(f"no GPU: {reason}")
    workers, _ = enginerun.engine_layout(ctx, "cuda")
    ctx.reporter.start(NAME, enginerun.work_units(ctx, workers))
    engine = enginerun.running(ctx, "cuda")
    figures = enginerun.measure(ctx, engine, workers)
    figures["device"] = "cuda"
    return figures
