"""The warm pool: worker processes that load a speech model once and answer calls."""

from byoa_skills.pool.config import PoolConfig, default_layout
from byoa_skills.pool.errors import (
    CallFailure,
    DeadlineExceeded,
    NotReady,
    QueueFull,
    ShuttingDown,
    TranscribeFailed,
    WorkerCrashed,
    WorkerStartFailed,
)
from byoa_skills.pool.pool import Transcription, WorkerPool

__all__ = [
    "CallFailure",
    "DeadlineExceeded",
    "NotReady",
    "PoolConfig",
    "QueueFull",
    "ShuttingDown",
    "TranscribeFailed",
    "Transcription",
    "WorkerCrashed",
    "WorkerPool",
    "WorkerStartFailed",
    "default_layout",
]
