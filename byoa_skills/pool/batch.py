"""One batch on one worker: write the clips' samples to the slot's shared memory, send the
job, and answer each call, at its own deadline if the batch is still running then.

Every call of the batch gets exactly one answer: its transcription, the model's refusal,
``deadline-exceeded``, ``worker-crashed``, or ``shutting-down`` when the pool closes under it.
What to do with the worker afterwards is the supervisor's: :func:`run_batch` only says why
it must be replaced.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Literal

from byoa_skills.pool.calls import Call, Transcription, fail
from byoa_skills.pool.errors import DeadlineExceeded, ShuttingDown, TranscribeFailed, WorkerCrashed
from byoa_skills.pool.messages import Job, JobItem, Refusal
from byoa_skills.pool.slot import Slot
from byoa_skills.pool.worker import WorkerDied

log = logging.getLogger("byoa_skills.pool")

#: Why a batch leaves its worker to be replaced: it overran the last deadline (and was
#: killed), or it died.
Replace = Literal["deadline", "crashed"]


async def run_batch(slot: Slot, calls: list[Call], job_id: int, lone: bool) -> Replace | None:
    """Run ``calls`` as job ``job_id`` on ``slot``'s worker (``lone``: its encoder may use
    the idle cores); why the worker must be replaced, or None. The worker is killed only
    when the last deadline of the batch passes: the model cannot be interrupted."""
    worker = slot.worker
    assert worker is not None
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    items, offset = [], 0
    for call in calls:
        call.started = started
        slot.samples[offset : offset + call.clip.frames] = call.clip.samples
        items.append(JobItem(offset, call.clip.frames, call.language, call.request))
        offset += call.clip.frames
    overrun = "the call overran its deadline"
    timers = [
        loop.call_later(call.deadline - started, fail, call, DeadlineExceeded(overrun))
        for call in calls
    ]
    job = worker.run(Job(job_id, tuple(items), lone=lone))
    try:
        answers = await asyncio.wait_for(job, max(c.deadline for c in calls) - started)
    except asyncio.TimeoutError:
        worker.kill()
        for call in calls:
            fail(call, DeadlineExceeded(f"{overrun}; its worker was replaced"))
        return "deadline"
    except WorkerDied as died:
        for call in calls:
            fail(call, WorkerCrashed(str(died)))
        return "crashed"
    except asyncio.CancelledError:  # the pool is closing with these calls running
        worker.kill()
        for call in calls:
            fail(call, ShuttingDown("the engine stopped before the call finished"))
        raise
    finally:
        for timer in timers:
            timer.cancel()
    slot.calls_served += len(calls)
    done = time.monotonic()
    if len(calls) > 1:
        log.debug(
            "event=batch slot=%d size=%d ms=%.0f", slot.index, len(calls), (done - started) * 1000
        )
    for call, answer in zip(calls, answers, strict=True):
        if isinstance(answer, Refusal):
            fail(call, TranscribeFailed(answer.message, answer.code))
            continue
        transcription = Transcription(
            transcript=answer,
            seconds=done - call.arrived,
            queued_seconds=started - call.arrived,
            worker_pid=worker.pid or 0,
            batch_size=len(calls),
            lone=lone,
        )
        if not call.future.done():
            call.future.set_result(transcription)
    return None
