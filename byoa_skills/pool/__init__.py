"""The warm pool: worker processes that load a speech model once and answer calls."""

from .config import PoolConfig, default_layout
from .errors import (
    CallFailure,
    DeadlineExceeded,
    NotReady,
    QueueFull,
    ShuttingDown,
    TranscribeFailed,
    WorkerCrashed,
    WorkerStartFailed,
)
from .pool import Transcription, WorkerPool

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
