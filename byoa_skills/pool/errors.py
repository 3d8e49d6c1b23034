"""The ways a call to the pool can fail: one type each, each with a stable code."""

from __future__ import annotations

from byoa_skills.protocol.refusal import Refusal


class CallFailure(Refusal):
    """A call the pool could not answer with a transcript; ``code`` is stable, kebab-case."""

    code: str = "call-failed"

    def __init__(self, message: str) -> None:
        super().__init__(self.code, message, text=message)


class QueueFull(CallFailure):
    """Every worker is busy and the queue is full: refused at once, never piled up."""

    code = "queue-full"


class DeadlineExceeded(CallFailure):
    """The call's deadline passed, waiting or running (a running worker is then replaced)."""

    code = "deadline-exceeded"


class WorkerCrashed(CallFailure):
    """The worker running the call died; it is replaced, the call is not retried."""

    code = "worker-crashed"


class TranscribeFailed(CallFailure):
    """The model refused or failed on this input; the worker lives on."""

    code = "transcribe-failed"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code  # a runtime's own refusal code, e.g. unsupported-language


class ShuttingDown(CallFailure):
    """The pool is draining or closed and takes no new calls."""

    code = "shutting-down"


class NotReady(CallFailure):
    """The pool's workers are still loading; the engine reports ready once they are warm."""

    code = "not-ready"


class SkillUnavailable(CallFailure):
    """No worker can serve: each slot's worker failed to start too many times in a row, and
    the slots stopped trying. Calls are answered at once until the pool is started again."""

    code = "skill-unavailable"


class WorkerStartFailed(Exception):
    """A worker could not load its model or warm up (the message says why)."""
