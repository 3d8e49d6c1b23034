"""The code that runs inside a worker process.

It loads the model once, runs a warm-up inference, says ``ready`` on its pipe, then answers
one job at a time. A job is a batch of one or more clips, decoded together; their samples lie
one after the other in the shared memory block the parent owns, and the job message carries
only where each starts and how long it is. Messages on the pipe:

parent → worker: ``("job", id, [(offset, frames, language | None), ...])``, ``("stop",)``
worker → parent: ``("ready", pid, rss_mib)``, ``("failed", message)``,
``("answers", id, [answer, ...], rss_mib)``, one answer per clip in order:
``("result", {"text", "language", "language_probability", "seconds"})`` or
``("refused", code, message)``
"""

from __future__ import annotations

import os
import signal
import threading
from importlib import resources
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory

import numpy as np

from byoa_skills.pool.config import PoolConfig
from byoa_skills.wav import Clip, parse_wav

WARM_UP_CLIP = "warmup.wav"


def run_worker(conn: Connection, config: PoolConfig, shm_name: str) -> None:
    """The worker's whole life: load, warm up, report ready, answer jobs until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _thread_lock_for_progress_bars()
    try:
        shm = SharedMemory(name=shm_name)
        backend = _load_backend(config)
        if config.warm_up:
            backend.transcribe(warm_up_samples(), "en")
    except BaseException as error:  # a worker that cannot start says why, then ends
        conn.send(("failed", _one_line(error)))
        return
    conn.send(("ready", os.getpid(), rss_mib()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] != "job":
            return
        _, job_id, items = message
        conn.send(("answers", job_id, _answers(backend, shm, items), rss_mib()))


def _answers(backend, shm: SharedMemory, items: list[tuple[int, int, str | None]]) -> list[tuple]:  # type: ignore[no-untyped-def]
    """One answer per clip of the batch; a failure of the whole batch refuses each clip."""
    from byoa_skills.runtimes.speech import RuntimeRefusal

    try:
        batch = [(_samples(shm, offset, frames), language) for offset, frames, language in items]
        transcripts = backend.transcribe_batch(batch)
    except Exception as error:
        return [("refused", "transcribe-failed", _one_line(error))] * len(items)
    answers: list[tuple] = []  # type: ignore[type-arg]
    for transcript in transcripts:
        if isinstance(transcript, RuntimeRefusal):
            answers.append(("refused", transcript.code, transcript.message))
        else:
            answers.append(("result", {
                "text": transcript.text,
                "language": transcript.language,
                "language_probability": transcript.language_probability,
                "seconds": transcript.seconds,
            }))  # fmt: skip
    return answers


def _samples(shm: SharedMemory, offset: int, frames: int) -> np.ndarray:
    return Clip(np.frombuffer(shm.buf, dtype="<i2", count=frames, offset=2 * offset)).to_float32()


def _load_backend(config: PoolConfig):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from byoa_skills.runtimes.speech import DecodeOptions, load_backend

    options = DecodeOptions(encoder_seconds=config.encoder_seconds)
    if config.backend == "torch":
        options = replace(options, beam_size=1)  # it decodes greedily
    return load_backend(
        config.model_dir,
        model_name=config.model_name,
        device=config.device,
        compute_type=config.compute_type,
        cpu_threads=config.threads_per_worker,
        options=options,
        backend=config.backend,
    )


def _thread_lock_for_progress_bars() -> None:
    """faster-whisper makes (hidden) tqdm progress bars, whose default lock is a named
    semaphore shared between processes. A worker shares its bars with no other process, so a
    thread lock is enough, and no semaphore is left behind when the worker is killed."""
    try:
        import tqdm
    except ImportError:
        return
    tqdm.tqdm.set_lock(threading.RLock())


def warm_up_samples() -> np.ndarray:
    """The short spoken clip every worker transcribes once before it reports ready."""
    data = resources.files(__package__).joinpath(WARM_UP_CLIP).read_bytes()
    return parse_wav(data).to_float32()


def rss_mib() -> float:
    """This process's resident memory, in MiB."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}"[:300]
