"""Speech-to-text backends behind one small interface.

:class:`SpeechBackend` is the interface, :class:`Transcript` its answer, :class:`DecodeOptions`
the decoding options, :func:`load_backend` the way to get a loaded backend for a model folder.
Importing this package does not import faster-whisper, CTranslate2, onnxruntime, torch or
transformers: a backend imports them when it is loaded.
"""

from byoa_skills.runtimes.speech.base import (
    SAMPLE_RATE,
    Segment,
    SpeechBackend,
    Transcript,
    Word,
    check_samples,
)
from byoa_skills.runtimes.speech.errors import CODES, RuntimeRefusal
from byoa_skills.runtimes.speech.factory import BACKENDS, load_backend
from byoa_skills.runtimes.speech.options import DecodeOptions, DecodeRequest
from byoa_skills.runtimes.speech.whisper_ct2 import (
    DEFAULT_COMPUTE_TYPES,
    DEVICES,
    WhisperCT2Backend,
)
from byoa_skills.runtimes.speech.whisper_torch import WhisperTorchBackend

__all__ = [
    "BACKENDS",
    "CODES",
    "DEFAULT_COMPUTE_TYPES",
    "DEVICES",
    "SAMPLE_RATE",
    "DecodeOptions",
    "DecodeRequest",
    "RuntimeRefusal",
    "Segment",
    "SpeechBackend",
    "Transcript",
    "WhisperCT2Backend",
    "WhisperTorchBackend",
    "Word",
    "check_samples",
    "load_backend",
]
