"""Build and load the backend for a model folder."""

from __future__ import annotations

import os

from byoa_skills.runtimes.speech.base import SpeechBackend
from byoa_skills.runtimes.speech.devices import BACKENDS
from byoa_skills.runtimes.speech.encoder_choice import runs_openvino
from byoa_skills.runtimes.speech.options import DecodeOptions
from byoa_skills.runtimes.speech.whisper_ct2 import WhisperCT2Backend
from byoa_skills.runtimes.speech.whisper_torch import WhisperTorchBackend


def load_backend(
    model_dir: str | os.PathLike[str],
    *,
    model_name: str = "base",
    device: str = "cpu",
    compute_type: str = "default",
    cpu_threads: int = 0,
    num_workers: int = 1,
    options: DecodeOptions | None = None,
    backend: str = "ct2",
    wide_threads: int = 0,
    encoder_backend: str = "auto",
) -> SpeechBackend:
    """A loaded backend for the CTranslate2 Whisper model in ``model_dir``, ready to transcribe.

    ``model_name`` (e.g. ``base``, ``tiny.en``) names the model for messages; which languages it
    can do is read from the model itself. ``backend`` ``ct2`` is :class:`WhisperCT2Backend`,
    ``torch`` :class:`WhisperTorchBackend` (greedy decoding; it has no ``num_workers``). The
    other arguments are those of the backend's class (``wide_threads`` is the CTranslate2
    backend's alone; the torch backend has none). ``encoder_backend`` is the setting
    :func:`~byoa_skills.runtimes.speech.encoder_choice.choose_encoder` resolves; the torch
    backend refuses ``openvino``. Raises what its ``load()`` raises.
    """
    loaded: SpeechBackend
    if backend == "ct2":
        loaded = WhisperCT2Backend(
            model_dir,
            device=device,
            compute_type=compute_type,
            cpu_threads=cpu_threads,
            num_workers=num_workers,
            options=options,
            name=model_name,
            wide_threads=wide_threads,
            encoder_backend=encoder_backend,
        )
    elif backend == "torch":
        if runs_openvino(encoder_backend):
            raise ValueError("encoder_backend openvino runs before CTranslate2's decoder only")
        loaded = WhisperTorchBackend(
            model_dir,
            device=device,
            compute_type=compute_type,
            cpu_threads=cpu_threads,
            options=options,
            name=model_name,
        )
    else:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    loaded.load()
    return loaded
