"""Build and load the backend for a model folder."""

from __future__ import annotations

import os

from .base import SpeechBackend
from .options import DecodeOptions
from .whisper_ct2 import WhisperCT2Backend


def load_backend(
    model_dir: str | os.PathLike[str],
    *,
    model_name: str = "base",
    device: str = "cpu",
    compute_type: str = "default",
    cpu_threads: int = 0,
    num_workers: int = 1,
    options: DecodeOptions | None = None,
) -> SpeechBackend:
    """A loaded backend for the CTranslate2 Whisper model in ``model_dir``, ready to transcribe.

    ``model_name`` (e.g. ``base``, ``tiny.en``) names the model for messages; which languages it
    can do is read from the model itself. The other arguments are those of
    :class:`WhisperCT2Backend`. Raises what :meth:`WhisperCT2Backend.load` raises.
    """
    backend = WhisperCT2Backend(
        model_dir,
        device=device,
        compute_type=compute_type,
        cpu_threads=cpu_threads,
        num_workers=num_workers,
        options=options,
        name=model_name,
    )
    backend.load()
    return backend
