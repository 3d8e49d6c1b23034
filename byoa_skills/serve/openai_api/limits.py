"""The OpenAI routes' limits: the largest file, the longest recording, how many recordings are
decoded at once, and the uploads held before their turn; the defaults, or what the environment
sets when ``serve`` starts."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from byoa_skills.recordings import (
    DEFAULT_AT_ONCE,
    DEFAULT_MAX_SECONDS,
    DEFAULT_WAITING,
    DEFAULT_WAITING_BYTES,
)

#: The largest file taken by default, in bytes (OpenAI's own limit).
DEFAULT_MAX_UPLOAD_BYTES = 25 * 1024 * 1024
#: Environment variables that change the limits: megabytes, minutes of audio, how many
#: recordings are decoded at once, and how many uploads (and megabytes) may wait their turn.
UPLOAD_LIMIT_ENV = "BYOA_SKILLS_MAX_UPLOAD_MB"
DURATION_LIMIT_ENV = "BYOA_SKILLS_MAX_RECORDING_MINUTES"
AT_ONCE_ENV = "BYOA_SKILLS_RECORDINGS_AT_ONCE"
WAITING_ENV = "BYOA_SKILLS_UPLOADS_WAITING"
WAITING_BYTES_ENV = "BYOA_SKILLS_UPLOADS_WAITING_MB"


@dataclass(frozen=True)
class UploadLimits:
    """The largest file (bytes), the longest recording (seconds) these routes take, how many
    recordings are decoded at once (``at_once``), and how many uploads may be held before
    their turn (``waiting``), holding at most ``waiting_bytes`` in all. Checked when made:
    ``ValueError`` for a value that is not finite and above 0 (the counts and bytes: a whole
    number of at least 1)."""

    max_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    max_seconds: float = DEFAULT_MAX_SECONDS
    at_once: int = DEFAULT_AT_ONCE
    waiting: int = DEFAULT_WAITING
    waiting_bytes: int = DEFAULT_WAITING_BYTES

    def __post_init__(self) -> None:
        for name in ("max_bytes", "at_once", "waiting", "waiting_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")
        if not _finite_positive(self.max_seconds):
            raise ValueError(
                f"max_seconds must be a finite number above 0, got {self.max_seconds!r}"
            )

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> UploadLimits:
        """The limits :data:`UPLOAD_LIMIT_ENV`, :data:`DURATION_LIMIT_ENV`,
        :data:`AT_ONCE_ENV`, :data:`WAITING_ENV` and :data:`WAITING_BYTES_ENV` set, else the
        defaults. Raises ``ValueError`` with a one-line message naming the variable for a
        value that is not a finite number above 0 (for the counts, not a whole number of at
        least 1)."""
        env = dict(os.environ if env is None else env)
        limits = cls()
        minutes = _positive(env, DURATION_LIMIT_ENV)
        return cls(
            max_bytes=_megabytes(env, UPLOAD_LIMIT_ENV) or limits.max_bytes,
            max_seconds=minutes * 60 if minutes else limits.max_seconds,
            at_once=_whole(env, AT_ONCE_ENV) or limits.at_once,
            waiting=_whole(env, WAITING_ENV) or limits.waiting,
            waiting_bytes=_megabytes(env, WAITING_BYTES_ENV) or limits.waiting_bytes,
        )


def _megabytes(env: dict[str, str], name: str) -> int | None:
    megabytes = _positive(env, name)
    if megabytes is None:
        return None
    if int(megabytes * 1024 * 1024) < 1:
        raise ValueError(f"{name} must be at least one byte, got {env[name]!r}")
    return int(megabytes * 1024 * 1024)


def _positive(env: dict[str, str], name: str) -> float | None:
    value = env.get(name)
    if value is None or not value.strip():
        return None
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not _finite_positive(number):
        raise ValueError(f"{name} must be a finite number above 0, got {value!r}")
    return number


def _whole(env: dict[str, str], name: str) -> int | None:
    value = env.get(name)
    if value is None or not value.strip():
        return None
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")
    return number


def _finite_positive(number: Any) -> bool:
    return (
        isinstance(number, (int, float))
        and not isinstance(number, bool)
        and math.isfinite(number)
        and number > 0
    )
