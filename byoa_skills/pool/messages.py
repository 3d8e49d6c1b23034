"""What the pool and its workers say to each other on the pipe: one type per message.

Both sides import these types, so neither reads the other's messages by position. A job's
samples never travel on the pipe: they lie one clip after the other in the shared memory block
the parent owns, and a :class:`JobItem` says only where a clip starts and how long it is.

parent → worker: :class:`Job`, :class:`Stop`.
worker → parent: :class:`Ready` or :class:`StartFailed` once, then one :class:`Answers` per
:class:`Job`, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from byoa_skills.runtimes.speech.base import Transcript
from byoa_skills.runtimes.speech.options import DecodeRequest


@dataclass(frozen=True)
class JobItem:
    """One clip of a job: where its samples start in the shared block, how many there are, the
    language spoken (None: detect it), and what the call asks of the decoder beyond the text
    (the default: text only, decoded with the job's other plain clips as one batch)."""

    offset: int
    frames: int
    language: str | None
    request: DecodeRequest = field(default_factory=DecodeRequest)


@dataclass(frozen=True)
class Job:
    """Transcribe these clips, decoded together as one batch; ``id`` names the answer.
    ``lone``: no other worker is busy, so the encoder may use the idle cores."""

    id: int
    items: tuple[JobItem, ...]
    lone: bool = False


@dataclass(frozen=True)
class Stop:
    """Finish and end the process."""


@dataclass(frozen=True)
class Ready:
    """The worker has loaded its model and warmed up; its resident memory then, in MiB, and
    the encoder it runs (``openvino-bf16``…) with why (a fallback says what failed), and
    CTranslate2's CPU kernels (``mkl-avx2``; ``ctranslate2``: its own pick; "": not on the
    CPU), and what runs its VAD (``openvino``, ``onnxruntime``; "": no VAD)."""

    pid: int
    rss_mib: float
    encoder: str = ""
    encoder_reason: str = ""
    encoder_precision: str = ""
    kernels: str = ""
    vad: str = ""


@dataclass(frozen=True)
class EncoderRunning:
    """The encoder a ready worker runs (``label``, empty: not said), why (``reason``), its
    precision in words (``int8, float layers bf16``), and the CTranslate2 CPU kernels it
    decodes with (``kernels``, as :class:`Ready` says them), and what runs its VAD (``vad``)."""

    label: str
    reason: str
    precision: str = ""
    kernels: str = ""
    vad: str = ""


@dataclass(frozen=True)
class StartFailed:
    """The worker could not load its model or warm up, and ends; ``message`` says why."""

    message: str


@dataclass(frozen=True)
class Refusal:
    """The model refused or failed on one clip: a stable code (a runtime's own, such as
    ``unsupported-language``, or ``transcribe-failed``) and a one-line message."""

    code: str
    message: str


#: What a worker answers for one clip: the runtime's transcript, or why there is none.
Answer = Transcript | Refusal


@dataclass(frozen=True)
class Answers:
    """The answers to job ``job_id``, one per clip in the job's order, and the worker's
    resident memory after the job, in MiB."""

    job_id: int
    answers: tuple[Answer, ...]
    rss_mib: float


#: Every message the parent sends.
ToWorker = Job | Stop
#: Every message a worker sends.
FromWorker = Ready | StartFailed | Answers
