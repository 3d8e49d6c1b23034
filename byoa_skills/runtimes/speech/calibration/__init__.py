"""The int8 encoder's calibration set: 23 clips of real speech from the tune part of the
real-speech set (``scripts/make_calibration_set.py`` writes it; its README gives sources and
licences), and the log-Mel windows the quantizer measures activations on.

Only numpy, the standard library and soundfile (when the windows are read) are imported.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

CALIBRATION_DIR = Path(__file__).resolve().parent
SOUND_NAME, CLIPS_NAME = "tune.flac", "tune.json"


def calibration_list() -> list[dict[str, Any]]:
    """Each calibration clip's record, in order: ``file``, ``language``, ``samples``."""
    return list(json.loads((CALIBRATION_DIR / CLIPS_NAME).read_text(encoding="utf-8"))["clips"])


def calibration_clips() -> list[np.ndarray]:
    """Each calibration clip's samples, float32 in [-1, 1] at 16 kHz."""
    import soundfile

    listed = calibration_list()
    samples, rate = soundfile.read(CALIBRATION_DIR / SOUND_NAME, dtype="float32")
    if rate != 16000 or sum(c["samples"] for c in listed) != len(samples):
        raise ValueError("the calibration set's sound and its list disagree")
    ends = np.cumsum([c["samples"] for c in listed])
    return [np.ascontiguousarray(part) for part in np.split(samples, ends[:-1])]


def calibration_windows(n_mels: int, count: int | None = None) -> list[np.ndarray]:
    """Each calibration clip (the first ``count`` of them; None: all) as the engine encodes
    it: its log-Mel features with ``n_mels`` bins in the whole 30 s window (zero-padded),
    float32 [1, n_mels, 3000]."""
    from faster_whisper.audio import pad_or_trim
    from faster_whisper.feature_extractor import FeatureExtractor

    extractor = FeatureExtractor(feature_size=n_mels)
    frames = extractor.nb_max_frames
    windows = []
    for clip in calibration_clips()[:count]:
        features = extractor(clip)
        window = pad_or_trim(features[:, : min(frames, features.shape[-1] - 1)], frames)
        windows.append(np.ascontiguousarray(window[None], dtype=np.float32))
    return windows


def calibration_sha256() -> str:
    """The SHA-256 of the calibration set's two files together (a changed set rebuilds)."""
    digest = hashlib.sha256()
    for name in (SOUND_NAME, CLIPS_NAME):
        digest.update((CALIBRATION_DIR / name).read_bytes())
    return digest.hexdigest()
