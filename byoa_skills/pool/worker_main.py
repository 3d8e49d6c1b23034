"""The code that runs inside a worker process.

It loads the model once, runs a warm-up inference, says :class:`Ready` on its pipe, then answers
one :class:`Job` at a time with its :class:`Answers`, until it gets :class:`Stop` or the pipe
closes. A job is a batch of one or more clips, decoded together; their samples lie one after
the other in the shared memory block the parent owns (the message types are in
:mod:`byoa_skills.pool.messages`).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import threading
import types
from importlib import resources
from importlib.machinery import ModuleSpec
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory

import numpy as np

from byoa_skills.pool.config import PoolConfig
from byoa_skills.pool.memory import rss_mib as process_rss_mib
from byoa_skills.pool.messages import Answer, Answers, Job, JobItem, Ready, Refusal, StartFailed
from byoa_skills.pool.parent_death import die_with_parent
from byoa_skills.wav import Clip, parse_wav

WARM_UP_CLIP = "warmup.wav"
#: What a worker gets when the process that started it ends (a ``serve`` killed with
#: SIGKILL included): a worker has nothing to save, and no handler can delay this one.
PARENT_DEATH_SIGNAL = signal.SIGKILL


def run_worker(
    conn: Connection,
    config: PoolConfig,
    shm_name: str,
    wide: bool = False,
    parent: int | None = None,
) -> None:
    """The worker's whole life: load, warm up, report ready, answer jobs until told to stop.
    ``wide``: it also loads the encoder a lone call runs on ``config.wide_threads`` threads.
    ``parent``: the pid of the process that started it; the worker ends when that one does,
    however it ends (:data:`PARENT_DEATH_SIGNAL`)."""
    if parent is not None:
        die_with_parent(parent, PARENT_DEATH_SIGNAL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _thread_lock_for_progress_bars()
    try:
        if config.encoder.engine == "openvino":
            defer_audio_file_decoder()
        shm = SharedMemory(name=shm_name)
        kernels = _choose_kernels(config)
        backend = _load_backend(config, wide)
        if config.warm_up:
            backend.transcribe(warm_up_samples(), "en")
            if wide:
                backend.transcribe_batch([(warm_up_samples(), "en")], wide=True)
    except BaseException as error:  # a worker that cannot start says why, then ends
        conn.send(StartFailed(_one_line(error)))
        return
    encoder = getattr(backend, "encoder", None)
    said = (encoder.label, encoder.reason, encoder.precision_said) if encoder else ("", "", "")
    conn.send(Ready(os.getpid(), rss_mib(), *said, kernels=kernels, vad=_vad_runtime(backend)))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if not isinstance(message, Job):  # Stop, or nothing this worker knows
            return
        answers = _answers(backend, shm, message.items, message.lone)
        conn.send(Answers(message.id, answers, rss_mib()))


def _answers(  # type: ignore[no-untyped-def]
    backend, shm: SharedMemory, items: tuple[JobItem, ...], lone: bool
) -> tuple[Answer, ...]:
    """One answer per clip of the job: the plain clips decoded as one batch (a failure of the
    batch refuses each of them; ``lone``: on the idle cores too), the others one by one as
    their requests ask."""
    from byoa_skills.runtimes.speech import RuntimeRefusal

    plain = [index for index, item in enumerate(items) if item.request.plain]
    answers: list[Answer] = [Refusal("transcribe-failed", "not decoded")] * len(items)
    try:
        batch = [
            (_samples(shm, items[i].offset, items[i].frames), items[i].language) for i in plain
        ]
        decoded = backend.transcribe_batch(batch, wide=lone) if batch else []
        for index, answer in zip(plain, decoded, strict=True):
            answers[index] = answer
    except Exception as error:
        for index in plain:
            answers[index] = Refusal("transcribe-failed", _one_line(error))
    for index, item in enumerate(items):
        if item.request.plain:
            continue
        try:  # timestamps, a prompt or a translation: one clip at a time
            samples = _samples(shm, item.offset, item.frames)
            answers[index] = backend.transcribe_detailed(samples, item.language, item.request)
        except RuntimeRefusal as refusal:
            answers[index] = Refusal(refusal.code, refusal.message)
        except Exception as error:
            answers[index] = Refusal("transcribe-failed", _one_line(error))
    return tuple(
        Refusal(answer.code, answer.message) if isinstance(answer, RuntimeRefusal) else answer
        for answer in answers
    )


def _samples(shm: SharedMemory, offset: int, frames: int) -> np.ndarray:
    return Clip(np.frombuffer(shm.buf, dtype="<i2", count=frames, offset=2 * offset)).to_float32()


def _vad_runtime(backend) -> str:  # type: ignore[no-untyped-def]
    """What runs the backend's VAD (``openvino``, ``onnxruntime``); "" where it has none."""
    options = getattr(backend, "options", None)
    if options is None or not options.vad_filter:
        return ""
    from byoa_skills.runtimes.speech.vad import vad_runtime

    return vad_runtime()


def _choose_kernels(config: PoolConfig) -> str:
    """Set the CTranslate2 CPU kernels chosen for this machine before the model loads (see
    :mod:`~byoa_skills.runtimes.speech.ct2_kernels`); their label ("" off the CPU or with
    the torch backend)."""
    from byoa_skills.runtimes.speech.devices import Backend, Device

    if config.device is not Device.CPU or config.backend is not Backend.CT2:
        return ""
    from byoa_skills.runtimes.speech import ct2_kernels

    choice = ct2_kernels.kernels_for(config.model_dir)
    ct2_kernels.apply(choice)
    return choice.label


def _load_backend(config: PoolConfig, wide: bool = False):  # type: ignore[no-untyped-def]
    from byoa_skills.runtimes.speech import load_backend

    return load_backend(
        config.model_dir,
        model_name=config.model_name,
        device=config.device.value,
        compute_type=config.compute_type,
        cpu_threads=config.threads_per_worker,
        options=config.decode_options(),
        backend=config.backend.value,
        encoder_backend=config.encoder_backend,
        **({"wide_threads": config.wide_threads} if wide else {}),
    )


def defer_audio_file_decoder() -> None:
    """Make ``import av`` in this process cheap: faster-whisper imports PyAV (FFmpeg's
    libraries, 12 to 17 MiB of a process) to read audio files, and a worker is given samples,
    never files. ``av`` stands for PyAV until something first reads one of its names, which
    imports PyAV then. Does nothing where PyAV is already imported or not installed.

    A worker does this where its encoder is OpenVINO only: in one on CTranslate2's encoder,
    PyAV's libraries loaded at the start leave glibc's heap in a shape that holds 35 to 42 MiB
    less after the calls (docs/pool.md, "Start and readiness")."""
    if "av" in sys.modules:
        return
    spec = importlib.util.find_spec("av")
    if spec is not None:
        sys.modules["av"] = _ImportedOnFirstUse(spec)


class _ImportedOnFirstUse(types.ModuleType):
    """A module's stand-in in ``sys.modules``: its first name read imports the module.

    Not ``importlib.util.LazyLoader``: on Python 3.11 the import system reads ``__spec__`` of a
    module it finds in ``sys.modules``, which makes a lazy module load at the next ``import
    av``; here ``__spec__`` is a plain attribute and only other names load the module."""

    def __init__(self, spec: ModuleSpec) -> None:
        super().__init__(spec.name)
        self.__spec__ = spec

    def __getattr__(self, name: str) -> object:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        module = importlib.import_module(self.__name__)
        self.__dict__.update({k: v for k, v in vars(module).items() if k != "__spec__"})
        return getattr(module, name)


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
    """This process's resident memory, in MiB (its peak where ``/proc`` cannot tell)."""
    current = process_rss_mib()
    if current is not None:
        return current
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}"[:300]
