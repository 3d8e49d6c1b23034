"""How the pool is laid out and how long it waits."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from byoa_skills.wav import MAX_CLIP_SECONDS


def available_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_layout(device: str = "cpu") -> tuple[int, int]:
    """``(workers, threads per worker)``: one single-threaded worker per core on the CPU
    (two 1-thread processes beat one 2-thread process on 2 cores), one worker on a GPU."""
    if device == "cuda":
        return 1, 1
    return max(1, available_cores()), 1


@dataclass(frozen=True)
class PoolConfig:
    """Everything a pool needs to start its workers; picklable, sent to each worker."""

    model_dir: Path
    model_name: str = "base"
    device: str = "cpu"
    compute_type: str = "default"
    #: The speech backend each worker loads: ``ct2`` (CTranslate2) or ``torch`` (PyTorch).
    backend: str = "ct2"
    workers: int = field(default_factory=lambda: default_layout()[0])
    threads_per_worker: int = 1
    #: Calls waiting for a worker beyond this are refused with ``queue-full``.
    max_queue: int = 64
    #: The deadline of a call that names none, in seconds (the wallet's 120 s).
    default_deadline: float = 120.0
    #: The longest clip the pool takes, in seconds; sizes each worker's audio buffer.
    max_clip_seconds: float = MAX_CLIP_SECONDS
    #: A worker is replaced after this many calls (0: never).
    recycle_after_calls: int = 10_000
    #: A worker whose resident memory passes this many MiB after a call is replaced (0: never).
    max_worker_rss_mib: int = 2048
    #: How long a worker may take to load its model and warm up, in seconds.
    start_timeout: float = 300.0
    #: How long a worker asked to stop may take before it is killed, in seconds.
    stop_grace: float = 5.0
    #: Whether each worker runs a warm-up inference before it reports ready.
    warm_up: bool = True
    #: The most calls a worker decodes together in one batch (1: one at a time). A worker
    #: that comes free takes every waiting call up to this many.
    max_batch: int = 1
    #: How long a worker that took a call waits for others to join its batch, in seconds;
    #: only while every other worker is busy (a lone call on an idle pool never waits).
    batch_window: float = 0.0
    #: Encode only this many seconds of each window when the clips fit (None: all 30 s).
    encoder_seconds: float | None = None
