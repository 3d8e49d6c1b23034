"""A child that ends with its parent: on Linux the kernel sends it a signal when the parent
ends, however the parent ends (SIGKILL included).

Used inside the pool's workers and by the children ``byoa-bench`` starts. Elsewhere it does
nothing; the parent's own clean-up is then all there is.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

#: prctl(2)'s option that sets the signal a process gets when its parent ends.
_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, looked up at import, before any fork (None off Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()

#: Whether :func:`die_with_parent` can ask the kernel for the signal here.
SUPPORTED = _prctl is not None


def die_with_parent(parent: int, signum: signal.Signals = signal.SIGTERM) -> None:
    """Called in the child: ask for ``signum`` when the parent ends, then end at once
    (exit 1) if the parent ``parent`` (its pid) has already ended, since the signal would
    then never come.

    The signal follows the *thread* that started the child: a child started from a thread
    that ends is sent it then, while the parent lives on.
    """
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)
