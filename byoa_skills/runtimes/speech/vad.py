"""Cutting non-speech out of a clip with the Silero VAD that faster-whisper ships inside its
package (``faster_whisper/assets``): nothing is downloaded. faster-whisper is imported when a
function here is called, not when this module is."""

from __future__ import annotations

from typing import Any

import numpy as np

from byoa_skills.runtimes.speech.options import DecodeOptions


def load_vad(options: DecodeOptions) -> Any:
    """Load the Silero model (once per process) and return faster-whisper's ``VadOptions``
    for the thresholds in ``options``."""
    from faster_whisper.vad import VadOptions, get_vad_model

    get_vad_model()
    return VadOptions(
        threshold=options.vad_threshold,
        min_silence_duration_ms=options.vad_min_silence_ms,
        speech_pad_ms=options.vad_speech_pad_ms,
    )


def speech_only(samples: np.ndarray, vad_options: Any) -> np.ndarray:
    """The speech in ``samples``, its chunks joined; an empty array when there is none."""
    from faster_whisper.vad import get_speech_timestamps

    if samples.size == 0:
        return samples
    chunks = get_speech_timestamps(samples, vad_options)
    if not chunks:
        return samples[:0]
    return np.concatenate([samples[chunk["start"] : chunk["end"]] for chunk in chunks])
