"""The code that runs inside a worker process.

It loads the model once, runs a warm-up inference, says ``ready`` on its pipe, then answers
one job at a time. A job's samples are in the shared memory block the parent owns; the job
message carries only their count. Messages on the pipe:

parent → worker: ``("job", id, frames, language | None)``, ``("stop",)``
worker → parent: ``("ready", pid, rss_mib)``, ``("failed", message)``,
``("result", id, {"text", "language", "language_probability", "seconds", "rss_mib"})``,
``("refused", id, code, message, rss_mib)``
"""

from __future__ import annotations

import os
import signal
import threading
from importlib import resources
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory

import numpy as np

from byoa_skills.wav import Clip, parse_wav

from .config import PoolConfig

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
        _, job_id, frames, language = message
        conn.send(_answer(backend, shm, job_id, frames, language))


def _answer(backend, shm: SharedMemory, job_id: int, frames: int, language: str | None) -> tuple:  # type: ignore[no-untyped-def]
    from byoa_skills.runtimes import RuntimeRefusal

    try:
        samples = Clip(np.frombuffer(shm.buf, dtype="<i2", count=frames)).to_float32()
        transcript = backend.transcribe(samples, language)
    except RuntimeRefusal as refusal:
        return ("refused", job_id, refusal.code, refusal.message, rss_mib())
    except Exception as error:
        return ("refused", job_id, "transcribe-failed", _one_line(error), rss_mib())
    result = {
        "text": transcript.text,
        "language": transcript.language,
        "language_probability": transcript.language_probability,
        "seconds": transcript.seconds,
        "rss_mib": rss_mib(),
    }
    return ("result", job_id, result)


def _load_backend(config: PoolConfig):  # type: ignore[no-untyped-def]
    from byoa_skills.runtimes import load_backend

    return load_backend(
        config.model_dir,
        model_name=config.model_name,
        device=config.device,
        compute_type=config.compute_type,
        cpu_threads=config.threads_per_worker,
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
