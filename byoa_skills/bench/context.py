"""What a run shares between its scenarios: the settings, the clips, the model folder, a
progress reporter, the figures measured so far, and the engine process when one is up."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from byoa_skills.bench.clips import RealClip


class Skip(Exception):
    """A scenario that cannot run here; its message is the reason printed and reported."""


@dataclass(frozen=True)
class Settings:
    """How much a run measures. :func:`settings_for` gives the full and the quick sizes."""

    quick: bool
    model: str
    device: str
    repeats: int  # sequential calls per clip length, per repeat round
    rounds: int  # repeat rounds (the spread is over these)
    calls: int  # calls in each throughput run (a mix of 1 s, 5 s and 15 s clips)
    cold_starts: int  # engine starts timed by the cold scenario
    wav_loops: int  # parses per clip and repeat in the wav scenario
    sweep: tuple[int, ...] | None = None  # concurrency levels; None: 1 .. 2 x workers
    judge_model: str = "smollm2"  # the judge scenario's model: smollm2 or a judge model
    judge_design: str | None = None  # the judge scenario's prompt design; None: the judge's

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict (for JSON)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def settings_for(
    quick: bool,
    model: str,
    device: str,
    calls: int | None = None,
    repeats: int | None = None,
    sweep: tuple[int, ...] | None = None,
    judge_model: str | None = None,
    judge_design: str | None = None,
) -> Settings:
    """The sizes of a full run (about 20 minutes for ``base`` on 2 cores) or a quick one
    (under 3 minutes); ``calls``, ``repeats`` and ``sweep`` override the defaults."""
    if quick:
        base = Settings(
            quick, model, device, repeats=2, rounds=1, calls=6, cold_starts=1, wav_loops=50
        )
    else:
        base = Settings(
            quick, model, device, repeats=5, rounds=3, calls=18, cold_starts=3, wav_loops=400
        )
    changes: dict[str, Any] = {}
    if calls is not None:
        changes["calls"] = calls
    if repeats is not None:
        changes["repeats"] = repeats
    if sweep:
        changes["sweep"] = tuple(sweep)
    if judge_model:
        changes["judge_model"] = judge_model
    if judge_design:
        changes["judge_design"] = judge_design
    return Settings(**{**base.__dict__, **changes})


class Reporter:
    """Progress of a run: a line for the current step and a count of work done. The base
    class says nothing; :class:`byoa_skills.bench.progress.RichReporter` draws a bar."""

    def start(self, scenario: str, total: int) -> None:
        """A scenario begins, with ``total`` units of work."""

    def step(self, text: str) -> None:
        """What the current scenario is doing now."""

    def advance(self, units: int = 1) -> None:
        """``units`` of the current scenario's work are done."""

    def finish(self, scenario: str, status: str) -> None:
        """A scenario ended with ``status`` (``ok``, ``skipped``, ``failed``)."""

    def note(self, text: str) -> None:
        """A line for the person watching (a skip reason, a warning)."""


@dataclass
class Context:
    """The state of one run."""

    settings: Settings
    clips: dict[str, np.ndarray]
    clip_source: str
    home: Path
    model_dir: Path
    cores: int
    reporter: Reporter = field(default_factory=Reporter)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    shared: dict[str, Any] = field(default_factory=dict)
    #: Where ``tune`` keeps the layout it chose: the user's own config, not the run's home.
    layout_path: Path | None = None
    #: The mixed real clips by length group (:func:`byoa_skills.bench.clips.real_groups`);
    #: their samples are in ``clips`` too, under their keys.
    real: dict[str, list[RealClip]] = field(default_factory=dict)

    def language(self, key: str) -> str:
        """The language spoken in the clip ``key`` (the test speech is English)."""
        found = next((c for g in self.real.values() for c in g if c.key == key), None)
        return found.language if found else "en"

    def real_mix(self, calls: int) -> list[str]:
        """``calls`` keys of the mixed real clips, the groups in turn (the throughput runs);
        the 1 s / 5 s / 15 s labels in turn when there are no real clips."""
        from byoa_skills.bench.clips import mix, real_mix

        return real_mix(self.real, calls) if self.real else mix(self.clips, calls)

    @property
    def workers(self) -> int:
        """Engine workers on the CPU: one single-threaded worker per core."""
        return self.cores

    def sweep(self, workers: int | None = None) -> tuple[int, ...]:
        """Concurrency levels: 1 to twice the workers (quick: 1, the workers, twice them)."""
        if self.settings.sweep:
            return self.settings.sweep
        most = 2 * (workers or self.workers)
        if self.settings.quick:
            return tuple(sorted({1, most // 2 or 1, most}))
        return tuple(range(1, most + 1))

    def close(self) -> None:
        """Stop whatever the scenarios left running (engines, peers), newest first."""
        while self.cleanups:
            cleanup = self.cleanups.pop()
            try:
                cleanup()
            except Exception as error:  # one failed stop must not keep the others running
                self.reporter.note(f"cleanup failed: {error}")


def make_home() -> Path:
    """A fresh temporary ``BYOA_SKILLS_HOME`` for the run (removed when the run ends)."""
    return Path(tempfile.mkdtemp(prefix="byoa-bench-"))


def keep_logs(home: Path, folder: Path) -> list[Path]:
    """Copy the logs a run's servers wrote in its ``home`` (``*.log`` at its top) into
    ``folder``, made where there are any; the copies' paths."""
    logs = sorted(path for path in home.glob("*.log") if path.is_file())
    if logs:
        folder.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(log, folder / log.name)) for log in logs]
