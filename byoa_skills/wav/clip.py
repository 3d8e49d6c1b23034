"""A parsed clip: 16 kHz mono 16-bit PCM samples, measured by us."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The only sample rate the skill takes, in frames per second.
SAMPLE_RATE = 16000
#: The longest clip the wallet 0.1 accepts, in seconds.
MAX_CLIP_SECONDS = 15.0


@dataclass(frozen=True)
class Clip:
    """A valid clip.

    ``samples`` is a little-endian int16 view on the buffer the clip was parsed from (no copy:
    it is read-only when that buffer is ``bytes``, and keeps it alive).
    """

    samples: np.ndarray

    @property
    def frames(self) -> int:
        """Number of frames (one sample each: the clip is mono)."""
        return int(self.samples.shape[0])

    @property
    def seconds(self) -> float:
        """Duration, ``frames / 16000``."""
        return self.frames / SAMPLE_RATE

    def to_float32(self) -> np.ndarray:
        """A new float32 array of the samples scaled to [-1, 1), as Whisper models take them."""
        out = self.samples.astype(np.float32)
        out *= np.float32(1.0 / 32768.0)
        return out
