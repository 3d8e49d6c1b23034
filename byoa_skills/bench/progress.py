"""A rich progress bar on stderr for a run: one bar per scenario, with its current step."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from byoa_skills.bench.context import Reporter


class RichReporter(Reporter):
    """Draws the run's progress on stderr; use as a context manager."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.fields[scenario]:<8}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=self.console,
            transient=False,
        )
        self.task: Any = None

    def __enter__(self) -> RichReporter:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def start(self, scenario: str, total: int) -> None:
        """A new bar for ``scenario``."""
        if self.task is not None and self.progress.tasks[-1].fields["scenario"] == scenario:
            self.progress.update(self.task, total=total, completed=0)
            return
        self.task = self.progress.add_task("", total=total, scenario=scenario)

    def step(self, text: str) -> None:
        """Show what the scenario does now."""
        if self.task is not None:
            self.progress.update(self.task, description=text)

    def advance(self, units: int = 1) -> None:
        """Move the current bar on."""
        if self.task is not None:
            self.progress.advance(self.task, units)

    def finish(self, scenario: str, status: str) -> None:
        """Close the current bar with its outcome."""
        if self.task is not None and self.progress.tasks[-1].fields["scenario"] == scenario:
            task = self.progress.tasks[-1]
            self.progress.update(self.task, completed=task.total, description=status)
        else:  # ended before its first step: a skip
            task_id = self.progress.add_task(status, total=1, scenario=scenario)
            self.progress.update(task_id, completed=1)  # stops its spinner and its clock
        self.task = None

    def note(self, text: str) -> None:
        """Print a line above the bars."""
        self.progress.console.print(f"[yellow]{text}")
