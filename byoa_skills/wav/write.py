"""Writing clips in the one format the skill takes: 16 kHz mono 16-bit PCM WAV."""

from __future__ import annotations

import base64
import struct

import numpy as np
from numpy.typing import ArrayLike

from byoa_skills.wav.clip import SAMPLE_RATE

_HEADER = struct.Struct("<4sI4s4sIHHIIHH4sI")


def wav_from_int16(samples: ArrayLike) -> bytes:
    """The WAV file holding these int16 samples exactly, with the plain 44-byte header."""
    pcm = np.asarray(samples)
    if pcm.ndim != 1:
        raise ValueError(f"samples must be one-dimensional, not of shape {pcm.shape}")
    if pcm.dtype != np.int16:
        raise ValueError(f"samples must be int16, not {pcm.dtype}")
    data = pcm.astype("<i2", copy=False).tobytes()
    header = _HEADER.pack(
        b"RIFF",
        36 + len(data),
        b"WAVE",
        b"fmt ",
        16,
        1,
        1,
        SAMPLE_RATE,
        SAMPLE_RATE * 2,
        2,
        16,
        b"data",
        len(data),
    )
    return header + data


def float_to_int16(samples: ArrayLike) -> np.ndarray:
    """Float samples in [-1, 1] to int16 exactly as the site guide's ``wavBase64`` helper does.

    Each value is clamped to [-1, 1], scaled by 32767 and truncated toward zero; NaN becomes 0.
    """
    values = np.asarray(samples, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"samples must be one-dimensional, not of shape {values.shape}")
    scaled = np.clip(np.nan_to_num(values, nan=0.0), -1.0, 1.0) * 0x7FFF
    return np.trunc(scaled).astype(np.int16)


def wav_from_float(samples: ArrayLike) -> bytes:
    """The WAV file the site guide's ``wavBase64`` helper writes for these float samples."""
    return wav_from_int16(float_to_int16(samples))


def wav_base64(samples: ArrayLike) -> str:
    """Base64 of :func:`wav_from_float`: byte for byte what ``wavBase64(samples)`` returns."""
    return base64.b64encode(wav_from_float(samples)).decode("ascii")
