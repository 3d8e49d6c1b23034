"""The bench's progress bars: every scenario's bar ends with its outcome, its clock stopped."""

from __future__ import annotations

import io

from rich.console import Console

from byoa_skills.bench.progress import RichReporter


def _reporter() -> RichReporter:
    return RichReporter(Console(file=io.StringIO(), force_terminal=False, width=100))


def test_a_scenario_skipped_before_its_first_step_has_a_finished_bar() -> None:
    with _reporter() as reporter:
        reporter.finish("gpu", "skipped")
        (task,) = reporter.progress.tasks
        assert task.finished
        assert task.fields["scenario"] == "gpu"
        assert task.description == "skipped"
        elapsed = task.finished_time
        assert elapsed is not None
        reporter.start("link", 5)  # the next scenario's bar does not restart the clock
        assert reporter.progress.tasks[0].finished_time == elapsed


def test_a_scenario_that_ran_ends_its_own_bar_with_its_outcome() -> None:
    with _reporter() as reporter:
        reporter.start("engine", 8)
        reporter.advance(3)
        reporter.finish("engine", "failed")
        (task,) = reporter.progress.tasks
        assert task.finished
        assert task.completed == 8
        assert task.description == "failed"
