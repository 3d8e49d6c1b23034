"""Drives an async call function: sequential latency per clip, and throughput with a fixed
number of calls in flight (each client sends its next call as soon as its last is answered)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from byoa_skills.bench.stats import spread_of, summarize

CallFn = Callable[[str], Awaitable[float]]
"""Sends the clip with this label and returns the seconds the client waited."""


@dataclass
class LevelResult:
    """One concurrency level: the throughput of each repeat round and every call's latency."""

    concurrency: int
    throughputs: list[float] = field(default_factory=list)
    latencies: list[list[float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Throughput (median over rounds, clips/s) and latency stats (seconds)."""
        flat = [x for group in self.latencies for x in group]
        ordered = sorted(self.throughputs)
        return {
            "concurrency": self.concurrency,
            "throughput": ordered[len(ordered) // 2],
            "throughput_rounds": self.throughputs,
            "throughput_spread": spread_of(self.throughputs),
            "latency_s": summarize(flat, self.latencies).to_dict(),
        }


async def saturate(
    call: CallFn, labels: Sequence[str], concurrency: int
) -> tuple[float, list[float]]:
    """Run every call in ``labels`` with ``concurrency`` in flight; (clips/s, latencies)."""
    pending = list(reversed(labels))
    latencies: list[float] = []

    async def client() -> None:
        while pending:
            latencies.append(await call(pending.pop()))

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return len(labels) / (time.perf_counter() - began), latencies


async def sweep(
    call: CallFn,
    labels: Sequence[str],
    levels: Sequence[int],
    rounds: int,
    advance: Callable[[int], None] = lambda n: None,
) -> list[LevelResult]:
    """:func:`saturate` at each level, ``rounds`` times; at least ``2 x level`` calls a run."""
    results = []
    for level in levels:
        result = LevelResult(level)
        run = list(labels)
        while len(run) < 2 * level:
            run += list(labels)
        for _ in range(rounds):
            throughput, latencies = await saturate(call, run, level)
            result.throughputs.append(throughput)
            result.latencies.append(latencies)
            advance(1)
        results.append(result)
    return results


async def by_clip(
    call: CallFn,
    labels: Sequence[str],
    repeats: int,
    rounds: int,
    advance: Callable[[int], None] = lambda n: None,
) -> dict[str, Any]:
    """Sequential latency of each clip, ``repeats`` calls a round; stats per label."""
    groups: dict[str, list[list[float]]] = {label: [] for label in labels}
    for _ in range(rounds):
        for label in labels:
            groups[label].append([await call(label) for _ in range(repeats)])
            advance(1)
    return {
        label: summarize([x for g in rounds_ for x in g], rounds_).to_dict()
        for label, rounds_ in groups.items()
    }


async def by_group(
    call: CallFn,
    groups: dict[str, list[str]],
    repeats: int,
    rounds: int,
    advance: Callable[[int], None] = lambda n: None,
) -> dict[str, Any]:
    """Sequential latency of each group of clips: every clip of a group ``repeats`` times a
    round, the group's calls pooled; the spread is over the rounds' medians."""
    samples: dict[str, list[list[float]]] = {name: [] for name in groups}
    for _ in range(rounds):
        for name, keys in groups.items():
            samples[name].append([await call(key) for key in keys for _ in range(repeats)])
            advance(1)
    return {
        name: summarize([x for g in rounds_ for x in g], rounds_).to_dict()
        for name, rounds_ in samples.items()
    }
