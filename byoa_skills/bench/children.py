"""What a command starts, it stops: the servers ``byoa-bench`` and the tests start (``serve``,
the wyoming peer, llama.cpp's server, the instant text source) end with the command.

Two holds, one inside the other:

- :func:`spawn` starts each child in its own session (a Ctrl-C in the terminal reaches the
  command alone, which then stops its children in order) and, on Linux, with a parent-death
  signal: the kernel sends the child SIGTERM when the thread that started it ends, however
  it ends (SIGKILL included). It also keeps the child in a list that :func:`stop_all` ends.
- :func:`signals_stop` turns SIGTERM and SIGHUP into ``KeyboardInterrupt``, so a command
  stopped by ``kill`` or ``timeout`` runs its ``finally`` blocks (each scenario's clean-ups)
  as it does on Ctrl-C, and :func:`stop_all` runs at exit for whatever is left.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from types import FrameType
from typing import Any

from byoa_skills.pool import parent_death
from byoa_skills.pool.parent_death import die_with_parent

#: The signal a child gets when its parent ends: a clean stop (``serve`` drains).
PARENT_DEATH_SIGNAL = signal.SIGTERM
#: Seconds a child has to end after SIGTERM before it is killed.
STOP_GRACE = 20.0

_started: list[subprocess.Popen[bytes]] = []
_lock = threading.Lock()


def _die_with(parent: int, signum: signal.Signals) -> Callable[[], None]:
    """The ``preexec_fn`` of a child of ``parent``: ask for ``signum`` when the parent ends,
    and end now if it already has (the signal would never come)."""

    def in_child() -> None:
        die_with_parent(parent, signum)

    return in_child


def spawn(
    command: Sequence[str],
    death_signal: signal.Signals = PARENT_DEATH_SIGNAL,
    **options: Any,
) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(command, **options)`` in a new session, ended by
    :func:`stop_all`, and, when started from the main thread on Linux, sent ``death_signal``
    (SIGTERM; SIGKILL for a server that may not end on SIGTERM while a request of the dead
    parent runs, as llama-cpp-python's) by the kernel when this process ends. (A
    parent-death signal follows the thread that started the child: from another thread it
    would come when that thread ends.)"""
    options.setdefault("start_new_session", True)
    if parent_death.SUPPORTED and threading.current_thread() is threading.main_thread():
        options.setdefault("preexec_fn", _die_with(os.getpid(), death_signal))
    process: subprocess.Popen[bytes] = subprocess.Popen(list(command), **options)
    with _lock:
        _started[:] = [p for p in _started if p.poll() is None]
        _started.append(process)
    return process


def stop(process: subprocess.Popen[bytes], grace: float = STOP_GRACE) -> int:
    """SIGTERM ``process``, SIGKILL it after ``grace`` seconds; its exit status."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


def stop_all(grace: float = STOP_GRACE, keep: Collection[subprocess.Popen[bytes]] = ()) -> None:
    """End every child :func:`spawn` started that still runs, but those in ``keep``: all are
    sent SIGTERM at once, then each is killed if it has not ended ``grace`` seconds later."""
    with _lock:
        running = [p for p in _started if p.poll() is None and p not in keep]
        _started[:] = [p for p in _started if p in keep]
    for process in running:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
    for process in running:
        stop(process, grace)


atexit.register(stop_all)


class Stopped(KeyboardInterrupt):
    """The command was told to stop by a signal other than SIGINT."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def signals_stop(
    signums: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGHUP),
) -> Iterator[None]:
    """Within the block, the first of ``signums`` raises :class:`Stopped` (a
    ``KeyboardInterrupt``) in the main thread; later ones are ignored while the clean-ups
    run. On leaving, every child :func:`spawn` started within the block and still running
    is stopped, and the handlers are put back. Off the main thread, signals are left alone
    (Python lets only the main thread handle them)."""
    with _lock:
        known = set(_started)
    if threading.current_thread() is not threading.main_thread():
        signums = ()
    previous = {signum: signal.getsignal(signum) for signum in signums}

    def handler(signum: int, frame: FrameType | None) -> None:
        for each in signums:
            signal.signal(each, signal.SIG_IGN)
        raise Stopped(signum)

    for signum in signums:
        signal.signal(signum, handler)
    try:
        yield
    finally:
        try:
            stop_all(keep=known)
        finally:
            for signum, was in previous.items():
                signal.signal(signum, was)


def exit_status(stopped: KeyboardInterrupt) -> int:
    """The exit status of a command ended by ``stopped``: 128 + the signal's number."""
    signum = stopped.signum if isinstance(stopped, Stopped) else signal.SIGINT
    return 128 + int(signum)
