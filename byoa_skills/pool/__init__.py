"""The warm pool: worker processes that load a speech model once and answer calls."""

from byoa_skills.pool.config import (
    DEFAULT_ENCODER_SECONDS,
    Backend,
    Device,
    PoolConfig,
    SettingError,
    default_layout,
    default_max_batch,
)
from byoa_skills.pool.errors import (
    CallFailure,
    DeadlineExceeded,
    NotReady,
    QueueFull,
    ShuttingDown,
    SkillUnavailable,
    TranscribeFailed,
    WorkerCrashed,
    WorkerStartFailed,
)
from byoa_skills.pool.pool import Transcription, WorkerPool

__all__ = [
    "DEFAULT_ENCODER_SECONDS",
    "Backend",
    "CallFailure",
    "DeadlineExceeded",
    "Device",
    "NotReady",
    "PoolConfig",
    "QueueFull",
    "SettingError",
    "ShuttingDown",
    "SkillUnavailable",
    "TranscribeFailed",
    "Transcription",
    "WorkerCrashed",
    "WorkerPool",
    "WorkerStartFailed",
    "default_layout",
    "default_max_batch",
]
