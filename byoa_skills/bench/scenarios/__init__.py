"""The scenarios of ``byoa-bench``, in the order a run measures them.

Each module has ``NAME``, ``TITLE`` and ``run(ctx) -> dict`` (its figures); ``run`` raises
:class:`byoa_skills.bench.context.Skip` with the reason when it cannot run on this machine.
"""

from __future__ import annotations

from types import ModuleType

from byoa_skills.bench.scenarios import (
    accuracy,
    batch,
    cold,
    direct,
    encoder,
    engine,
    floor,
    gpu,
    idle,
    judge,
    kernels,
    link,
    longform,
    longmemory,
    memory,
    peer,
    store,
    text,
    tune,
    wav,
)

#: Every scenario, in run order (direct and floor before the engine: its ratios need them;
#: kernels before any engine starts: its workers then decode with the kernels it chose).
_ORDER = (
    wav,
    direct,
    kernels,
    floor,
    cold,
    engine,
    memory,
    idle,
    peer,
    gpu,
    link,
    text,
    judge,
    batch,
    store,
    accuracy,
    longform,
    longmemory,
    encoder,
    tune,
)
SCENARIOS: dict[str, ModuleType] = {module.NAME: module for module in _ORDER}
#: Scenarios a run without names leaves out: ``tune`` changes the user's config;
#: ``longmemory`` sends hours of audio; ``encoder`` compares encoder backends, a question
#: asked of a new machine, not of every run; ``judge`` runs three llama.cpp servers and
#: measures the purpose judge, not the engine.
BY_NAME_ONLY = ("longmemory", "tune", "encoder", "judge")


def names() -> list[str]:
    """Scenario names in run order."""
    return list(SCENARIOS)


#: What ``--quick`` measures when no scenario is named: the headline figures (parsing, the
#: runtime called directly, the engine beside it, the words kept), in minutes; the full run
#: carries the rest, and any scenario named with ``--quick`` runs at its quick size.
QUICK = ("wav", "direct", "kernels", "engine", "accuracy")


def default_names(quick: bool = False) -> list[str]:
    """What a run measures when no scenario is named (``quick``: a ``--quick`` run)."""
    if quick:
        return [name for name in SCENARIOS if name in QUICK]
    return [name for name in SCENARIOS if name not in BY_NAME_ONLY]
