"""How the pool is laid out and how long it waits: one validated setting per field.

Each setting a command line sets names its flag in its field's metadata. The pool's checks
live here alone: :class:`PoolConfig` runs them when it is made, and the CLI runs the same ones
on each flag as it parses it (``commands/common.py``).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Any

from byoa_skills.runtimes.speech.devices import Backend, Device
from byoa_skills.runtimes.speech.encoder_choice import (
    ENCODER_BACKENDS,
    EncoderChoice,
    choose_encoder,
    runs_openvino,
)
from byoa_skills.runtimes.speech.options import DecodeOptions

#: One Whisper window, in seconds: the longest clip a pool can take (a piece of a long
#: recording is at most one window; sites' clips stay within their own 15 s).
WINDOW_SECONDS = 30.0

#: The encoder window the CTranslate2 backend uses when none is set, in seconds: the whole
#: window, because every shorter one lost words on real speech it was not chosen on
#: (docs/runtime.md, "Words first"). A smaller ``--encoder-seconds`` asks for the short
#: windows and their guard, for speed.
DEFAULT_ENCODER_SECONDS = 30.0

#: The shorter encoder windows below :data:`DEFAULT_ENCODER_SECONDS` a clip may get, in
#: seconds, and the margin its speech must leave in one (docs/runtime.md has the
#: measurements on the real-speech set they were chosen from).
DEFAULT_WINDOWS = (5.0, 10.0)
DEFAULT_WINDOW_MARGIN = 1.0
#: The models the per-language choices below were measured on; any other model keeps the
#: one short window of :data:`DEFAULT_ENCODER_SECONDS`, decoded with the beam.
MEASURED_MODELS = frozenset({"base"})
#: Per language, the shortest window that kept its words on the real-speech set: English 5 s,
#: Spanish and Italian 10 s; French and Russian lost words on every short window and keep
#: the whole one; a language not measured keeps the 15 s window.
DEFAULT_WINDOW_FLOORS: tuple[tuple[str, float], ...] = (
    ("en", 5.0),
    ("es", 10.0),
    ("it", 10.0),
    ("fr", 30.0),
    ("ru", 30.0),
    ("*", 15.0),
)
#: Greedy decoding for clips of at most this many seconds of speech in these languages (where
#: it kept the words), with the beam again for an answer below the log-probability floor.
DEFAULT_GREEDY_UP_TO_SECONDS = 6.0
DEFAULT_GREEDY_LANGUAGES = frozenset({"en", "it"})
DEFAULT_GREEDY_FALLBACK_LOGPROB = -0.3
#: More tokens than this per second of speech cannot be real speech (plus a slack).
DEFAULT_MAX_TOKENS_PER_SECOND = 12.0
#: A short-window answer less sure than this (average token log-probability) climbs a window.
DEFAULT_SHORT_WINDOW_LOGPROB = -0.6


def engine_decode_options(encoder_seconds: float | None, model_name: str = "base") -> DecodeOptions:
    """The engine's decoding options on CTranslate2 with the longest short window
    ``encoder_seconds`` (None or 30: the whole window only, as faster-whisper decodes): for a model
    of :data:`MEASURED_MODELS`, the shorter windows, the per-language floors, the guard and
    the greedy choice the real-speech measurements support; for another model the one short
    window with its guard."""
    if encoder_seconds is None or encoder_seconds >= WINDOW_SECONDS:
        return DecodeOptions()
    if model_name not in MEASURED_MODELS:
        return DecodeOptions(
            encoder_seconds=encoder_seconds, max_tokens_per_second=DEFAULT_MAX_TOKENS_PER_SECOND
        )  # the guard of the one short window as it was: no log-probability floor of its own
    return DecodeOptions(
        encoder_seconds=encoder_seconds,
        windows=tuple(w for w in DEFAULT_WINDOWS if w < encoder_seconds),
        window_margin=DEFAULT_WINDOW_MARGIN,
        window_floors=tuple((code, min(w, 30.0)) for code, w in DEFAULT_WINDOW_FLOORS),
        greedy_up_to_seconds=DEFAULT_GREEDY_UP_TO_SECONDS,
        greedy_languages=DEFAULT_GREEDY_LANGUAGES,
        greedy_fallback_logprob=DEFAULT_GREEDY_FALLBACK_LOGPROB,
        max_tokens_per_second=DEFAULT_MAX_TOKENS_PER_SECOND,
        short_window_logprob=DEFAULT_SHORT_WINDOW_LOGPROB,
    )


#: Calls a worker decodes together by default, by device: on the CPU batches did not pay
#: (``byoa-bench batch``, docs/pool.md); a GPU decodes a batch in about the time of one clip.
DEFAULT_MAX_BATCH = {Device.CPU: 1, Device.CUDA: 16}


def available_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_layout(device: str = Device.CPU) -> tuple[int, int]:
    """``(workers, threads per worker)``: one single-threaded worker per core on the CPU
    (two 1-thread processes beat one 2-thread process on 2 cores), one worker on a GPU."""
    if device == Device.CUDA:
        return 1, 1
    return max(1, available_cores()), 1


def default_max_batch(device: str = Device.CPU) -> int:
    """The calls a worker decodes together by default on ``device`` (``cpu`` or ``cuda``)."""
    return DEFAULT_MAX_BATCH[Device(device)]


def _flag(name: str) -> dict[str, str]:
    return {"flag": name}


@dataclass(frozen=True)
class PoolConfig:
    """Everything a pool needs to start its workers; picklable, sent to each worker.

    It checks itself when made: a value no worker could run with raises ``ValueError`` with a
    one-line message that names the setting's flag (or, for a setting with no flag, its field),
    so a bad setting is refused before any worker starts. ``backend`` and ``device`` may be
    given as strings; they are kept as :class:`Backend` and :class:`Device`.
    """

    model_dir: Path
    model_name: str = "base"
    #: ``cpu`` or ``cuda``; ``auto`` is resolved before a pool is configured
    #: (:func:`byoa_skills.runtimes.speech.devices.resolve_device`).
    device: Device = field(default=Device.CPU, metadata=_flag("--device"))
    compute_type: str = "default"
    #: The speech backend each worker loads: ``ct2`` (CTranslate2) or ``torch`` (PyTorch).
    backend: Backend = field(default=Backend.CT2, metadata=_flag("--backend"))
    #: What runs the encoder (:func:`choose_encoder`): ``auto`` (OpenVINO bf16 on a CPU with
    #: bf16 units, else CTranslate2; ``$BYOA_SKILLS_ENCODER`` stands in for it),
    #: ``ctranslate2``, ``openvino`` (on the CPU; bf16 where the units are, else f32), or
    #: ``openvino-f32`` / ``openvino-bf16``. The decoder is CTranslate2's in every case.
    encoder_backend: str = field(default="auto", metadata=_flag("--encoder-backend"))
    workers: int = field(default_factory=lambda: default_layout()[0], metadata=_flag("--workers"))
    threads_per_worker: int = field(default=1, metadata=_flag("--threads"))
    #: Sites' calls waiting for a worker beyond this are refused with ``queue-full``; the
    #: pieces of long recordings have as many places of their own and wait for one when they
    #: are taken, so they never fill the sites' places.
    max_queue: int = field(default=64, metadata=_flag("--queue"))
    #: The deadline of a call that names none, in seconds (the wallet's 120 s).
    default_deadline: float = 120.0
    #: The longest clip the pool takes, in seconds; sizes each worker's audio buffer. One
    #: window, so that the pieces of a long recording fit (sites' clips are checked against
    #: their own 15 s limit before they reach the pool).
    max_clip_seconds: float = WINDOW_SECONDS
    #: A worker is replaced after about this many calls (0: never); each worker draws its own
    #: threshold within ``recycle_jitter`` of it, so workers do not all restart together.
    recycle_after_calls: int = 10_000
    #: How far a worker's recycle threshold may be from ``recycle_after_calls``, as a fraction
    #: of it (0.1: ±10 %); a threshold is never below 1.
    recycle_jitter: float = 0.1
    #: A worker whose resident memory passes this many MiB after a call is replaced (0: never).
    max_worker_rss_mib: int = 2048
    #: How long a worker may take to load its model and warm up, in seconds.
    start_timeout: float = 300.0
    #: How long a worker asked to stop may take before it is killed, in seconds.
    stop_grace: float = 5.0
    #: A slot whose worker fails to start this many times in a row stops trying: it is
    #: unavailable until the pool is started again.
    max_start_failures: int = 5
    #: The wait before the first restart after a failed start, in seconds; it doubles with each
    #: failure in a row, up to 30 s.
    restart_backoff: float = 0.5
    #: Whether each worker runs a warm-up inference before it reports ready.
    warm_up: bool = True
    #: The most calls a worker decodes together in one batch (1: one at a time). A worker
    #: that comes free takes every waiting call up to this many.
    max_batch: int = field(default=1, metadata=_flag("--max-batch"))
    #: How long a worker that took a call waits for others to join its batch, in seconds;
    #: only while every other worker is busy (a lone call on an idle pool never waits).
    batch_window: float = field(default=0.0, metadata=_flag("--batch-window-ms"))
    #: Encode only this many seconds of each window when the clips fit (None: the backend's
    #: default, :data:`DEFAULT_ENCODER_SECONDS` on CTranslate2, the whole window on PyTorch;
    #: 30: the whole window).
    encoder_seconds: float | None = field(default=None, metadata=_flag("--encoder-seconds"))
    #: The threads a lone call's encoder runs on when every other worker is idle (None: every
    #: core, when the pool has several single-threaded CTranslate2 workers on the CPU; 0:
    #: never). Each worker then holds a second copy of the model for it; the decode stays on
    #: the worker's own threads (docs/pool.md has the figures).
    lone_call_threads: int | None = None
    #: After this many seconds without a call the workers are let go (the front process
    #: stays); the next call, grant or request starts them again. 0: never.
    idle_release: float = field(default=600.0, metadata=_flag("--idle-release"))
    #: Where workers, threads and batch size came from: ``default``, ``flags``, or ``tuned``
    #: and when (the layout ``byoa-bench tune`` measured; :mod:`byoa_skills.pool.tuned`).
    layout_source: str = "default"

    def __post_init__(self) -> None:
        for name in _RULES:
            object.__setattr__(self, name, check_setting(name, getattr(self, name)))
        if self.device == Device.AUTO:
            raise ValueError(
                "--device auto must be resolved to cpu or cuda before the pool is configured"
            )
        if self.backend == Backend.TORCH and self.encoder_seconds not in (None, WINDOW_SECONDS):
            # WhisperTorchBackend refuses it: it always encodes the whole 30 s window
            raise ValueError(
                "--encoder-seconds is not supported by --backend torch, which encodes the "
                "whole 30 s window"
            )
        if runs_openvino(self.encoder_backend) and (
            self.backend == Backend.TORCH or self.device != Device.CPU
        ):
            raise ValueError(
                "--encoder-backend openvino runs on the CPU before CTranslate2's decoder: "
                "not with --backend torch or --device cuda"
            )

    @cached_property
    def encoder(self) -> EncoderChoice:
        """The engine and precision that run the workers' encoder on this machine (the
        choice each worker makes for itself at load)."""
        compute = self.compute_type
        if compute == "default":
            compute = "float16" if self.device == Device.CUDA else "int8"
        return choose_encoder(
            self.encoder_backend,
            device=self.device.value,
            backend=self.backend.value,
            compute_type=compute,
        )

    @property
    def encoder_window(self) -> float | None:
        """The encoder window the workers use, in seconds (None: the whole 30 s window)."""
        if self.backend == Backend.TORCH:
            return None
        seconds = DEFAULT_ENCODER_SECONDS if self.encoder_seconds is None else self.encoder_seconds
        return None if seconds >= WINDOW_SECONDS else seconds

    @property
    def wide_threads(self) -> int:
        """The threads of a lone call's encoder (0: it runs on the worker's own threads)."""
        if self.lone_call_threads is not None:
            return self.lone_call_threads if self.lone_call_threads > 1 else 0
        several = self.workers > 1 and self.threads_per_worker == 1
        on_cpu = self.device == Device.CPU and self.backend == Backend.CT2
        return available_cores() if several and on_cpu and available_cores() > 1 else 0

    def decode_options(self) -> DecodeOptions:
        """The decoding options each worker loads its backend with: the engine's windows,
        guard and decode choices (:func:`engine_decode_options`) on CTranslate2."""
        if self.backend == Backend.TORCH:
            return DecodeOptions(beam_size=1)  # it decodes greedily, on the whole window
        return engine_decode_options(self.encoder_window, self.model_name)


class SettingError(ValueError):
    """A :class:`PoolConfig` setting no pool could run with; its message names the flag."""

    def __init__(self, flag: str, requirement: str, value: Any) -> None:
        super().__init__(f"{flag} must be {requirement}, got {value!r}")
        self.flag = flag
        self.requirement = requirement
        self.value = value


def flag_of(name: str) -> str:
    """The command-line flag of the :class:`PoolConfig` field ``name``, or the field's own name
    when no flag sets it."""
    return str(_FIELDS[name].metadata.get("flag", name))


def check_setting(name: str, value: Any) -> Any:
    """``value`` as the :class:`PoolConfig` field ``name`` keeps it (a string becomes its
    enum); raise :class:`SettingError` when no pool could run with it."""
    if name not in _RULES:
        return value
    accepts, requirement = _RULES[name]
    kind = _ENUMS.get(name)
    try:
        kept = kind(value) if kind is not None else value
        if accepts(kept):
            return kept
    except (TypeError, ValueError):
        pass
    raise SettingError(flag_of(name), requirement, value)


def recycle_threshold(calls: int, jitter: float, rng: random.Random) -> int:
    """One worker's recycle threshold: ``calls`` moved by a random fraction of at most
    ``jitter`` either way, at least 1; 0 (never recycle) stays 0."""
    if calls <= 0:
        return 0
    return max(1, round(calls * rng.uniform(1.0 - jitter, 1.0 + jitter)))


def _whole(minimum: int) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _number(
    low: float, high: float = float("inf"), *, above: bool = False
) -> Callable[[Any], bool]:
    def accepts(value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return (value > low if above else value >= low) and value <= high

    return accepts


def _encoder_seconds(value: Any) -> bool:
    if value is None:
        return True
    DecodeOptions(encoder_seconds=value)  # the runtime's own range: raises ValueError
    return _number(0.0, above=True)(value)


_ENUMS: dict[str, type[Backend] | type[Device]] = {"device": Device, "backend": Backend}
_POSITIVE = "a number above 0"
#: Per field: whether a value is accepted, and what the value must be.
_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "device": (lambda value: True, f"one of {', '.join(d.value for d in Device)}"),
    "backend": (lambda value: True, f"one of {', '.join(b.value for b in Backend)}"),
    "encoder_backend": (
        lambda value: value in ENCODER_BACKENDS,
        f"one of {', '.join(ENCODER_BACKENDS)}",
    ),
    "workers": (_whole(1), "a whole number of at least 1"),
    "threads_per_worker": (_whole(1), "a whole number of at least 1"),
    "max_queue": (_whole(1), "a whole number of at least 1"),
    "default_deadline": (_number(0.0, above=True), _POSITIVE),
    "max_clip_seconds": (
        _number(0.0, WINDOW_SECONDS, above=True),
        f"a number above 0, at most {WINDOW_SECONDS:g}",
    ),
    "recycle_after_calls": (_whole(0), "a whole number of at least 0 (0: never)"),
    "recycle_jitter": (_number(0.0, 0.9), "a fraction in [0, 0.9]"),
    "max_worker_rss_mib": (_whole(0), "a whole number of at least 0 (0: never)"),
    "start_timeout": (_number(0.0, above=True), _POSITIVE),
    "stop_grace": (_number(0.0, above=True), _POSITIVE),
    "max_start_failures": (_whole(1), "a whole number of at least 1"),
    "restart_backoff": (_number(0.0, above=True), _POSITIVE),
    "max_batch": (_whole(1), "a whole number of at least 1"),
    "batch_window": (_number(0.0), "a number of at least 0"),
    "encoder_seconds": (_encoder_seconds, "a number in [1, 30] (30: the whole window)"),
    "idle_release": (_number(0.0), "a number of seconds of at least 0 (0: never)"),
    "lone_call_threads": (
        lambda value: value is None or _whole(0)(value),
        "a whole number of at least 0 (0: never)",
    ),
}
_FIELDS = {setting.name: setting for setting in fields(PoolConfig)}
