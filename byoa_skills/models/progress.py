"""What the model functions report while they work, for a progress bar or a log."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: ``check``: the fast size-only check of a cached model; ``wait``: another process is
#: assembling the same model; ``download``: a hub download started; ``assemble``: bytes copied
#: (and hashed) into the cache; ``verify``: bytes of a cached model re-hashed.
PHASES = ("check", "wait", "download", "assemble", "verify")


@dataclass(frozen=True)
class Progress:
    """One report: in ``phase`` of work on ``model``, ``done`` of ``total`` bytes, currently
    on ``file`` (``None`` when the phase is not about one file)."""

    model: str
    phase: str
    done: int
    total: int
    file: str | None = None


#: A callable that receives each :class:`Progress` report; it must be quick and not raise.
ProgressFn = Callable[[Progress], None]
