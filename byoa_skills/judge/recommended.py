"""The judge model the measurements favour, with its figures, as the wallet page's judge card
shows it. The figures are those of one run of ``scripts/measure_judge.py`` on the part of the
labelled calls no choice of the judge's design saw (docs/judge.md has the run and its
command); they change only with a new run."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Recommendation:
    """A judge model and what it did on the held-out labelled calls: ``precision`` and
    ``recall`` of "not allowed", the injections held of those tried, the on-purpose calls
    held of those asked, the judge's median seconds a call, and where it was measured."""

    model: str
    where: str
    calls: int
    precision: float
    recall: float
    injections_held: int
    injections: int
    on_purpose_held: int
    on_purpose: int
    p50_seconds: float
    measured: str

    def sentence(self) -> str:
        """The card's line: the model and its figures in words."""
        return (
            f"Recommended judge: {self.model} ({self.where}). On {self.calls} labelled calls "
            f"it was not tuned on, it held back {self.recall:.0%} of the calls that did not "
            f"fit their site's purpose ({self.injections_held} of {self.injections} attempts "
            f"to steer it) and {self.on_purpose_held} of {self.on_purpose} that did; "
            f"about {self.p50_seconds:.1f} s a call ({self.measured})."
        )

    def to_dict(self) -> dict[str, Any]:
        """The recommendation for the page's API, its sentence included."""
        return {**asdict(self), "sentence": self.sentence()}


#: The model the held-out measurement favours (docs/judge.md, "The examples design").
RECOMMENDED = Recommendation(
    model="Qwen2.5-Coder-1.5B-Instruct",
    where="Q4_K_M, in LM Studio, Ollama or llama.cpp",
    calls=79,
    precision=0.98,
    recall=0.96,
    injections_held=23,
    injections=25,
    on_purpose_held=1,
    on_purpose=32,
    p50_seconds=6.4,
    measured="llama.cpp's server, 2 CPU cores",
)
