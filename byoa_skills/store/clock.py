"""Instants as the reference rules write them: milliseconds since the epoch, RFC 3339 text."""

from __future__ import annotations

import time
from datetime import datetime, timezone


def now_ms() -> int:
    """The wall clock, in milliseconds since the Unix epoch."""
    return time.time_ns() // 1_000_000


def rfc3339(ms: int) -> str:
    """``2026-10-10T12:00:00.123Z`` for an instant in milliseconds since the epoch."""
    moment = datetime.fromtimestamp(ms // 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
