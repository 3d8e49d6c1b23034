"""Summary statistics of timings: min, p50, p95, p99, max, mean and the spread over repeats."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class Stats:
    """A summary of ``n`` samples (seconds, or whatever unit they came in).

    ``spread`` is how much the repeats disagree: (largest - smallest) / median of the
    per-repeat medians when the samples came in repeats, else of the samples themselves.
    0 means every repeat gave the same figure.
    """

    n: int
    min: float
    p50: float
    p95: float
    p99: float
    max: float
    mean: float
    spread: float

    def to_dict(self) -> dict[str, float]:
        """The fields as a plain dict (for JSON)."""
        return asdict(self)


def _relative_range(values: Sequence[float]) -> float:
    middle = float(np.median(values))
    if not values or middle == 0:
        return 0.0
    return (max(values) - min(values)) / middle


def summarize(samples: Sequence[float], repeats: Sequence[Sequence[float]] | None = None) -> Stats:
    """Summarize ``samples``; ``repeats`` (the same samples grouped by repeat) gives the spread.

    Percentiles interpolate linearly between samples, so ``min <= p50 <= p95 <= p99 <= max``.
    Raises ``ValueError`` on no samples.
    """
    if not samples:
        raise ValueError("no samples to summarize")
    values = np.asarray(samples, dtype=float)
    p50, p95, p99 = (float(v) for v in np.percentile(values, [50, 95, 99]))
    groups = [g for g in (repeats or []) if g]
    if len(groups) > 1:
        spread = _relative_range([float(np.median(g)) for g in groups])
    else:
        spread = _relative_range(list(values))
    return Stats(
        n=len(values),
        min=float(values.min()),
        p50=p50,
        p95=p95,
        p99=p99,
        max=float(values.max()),
        mean=float(values.mean()),
        spread=spread,
    )


def spread_of(values: Sequence[float]) -> float:
    """(largest - smallest) / median of per-repeat figures such as throughputs; 0 for one."""
    return _relative_range(list(values)) if len(values) > 1 else 0.0
