"""Cutting non-speech out of a clip with the Silero VAD that faster-whisper ships inside its
package (``faster_whisper/assets``): nothing is downloaded. faster-whisper is imported when a
function here is called, not when this module is."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from byoa_skills.runtimes.speech.options import DecodeOptions

log = logging.getLogger("byoa_skills.runtimes")


def load_vad(options: DecodeOptions, on_openvino: bool = False) -> Any:
    """Load the Silero model (once per process) and return faster-whisper's ``VadOptions``
    for the thresholds in ``options``.

    ``on_openvino``: the process's VAD runs on OpenVINO
    (:class:`~byoa_skills.runtimes.speech.vad_openvino.OpenVINOSileroVAD`) from now on, for
    every caller of faster-whisper's VAD in it; where it cannot be compiled, onnxruntime runs
    it, as without the flag."""
    import faster_whisper.vad

    if on_openvino and vad_runtime() != "openvino":
        _run_on_openvino(faster_whisper.vad)
    faster_whisper.vad.get_vad_model()
    return faster_whisper.vad.VadOptions(
        threshold=options.vad_threshold,
        min_silence_duration_ms=options.vad_min_silence_ms,
        speech_pad_ms=options.vad_speech_pad_ms,
    )


def vad_runtime() -> str:
    """What runs this process's VAD: ``openvino`` or ``onnxruntime``."""
    import faster_whisper.vad

    return getattr(faster_whisper.vad.get_vad_model, "runtime", "onnxruntime")


def _run_on_openvino(module: Any) -> None:
    """faster-whisper finds its VAD model through ``get_vad_model`` at every call: that
    function now returns the OpenVINO one."""
    from byoa_skills.runtimes.speech.vad_openvino import OpenVINOSileroVAD, as_vad_model

    try:
        model = OpenVINOSileroVAD()
    except Exception as error:  # OpenVINO's own errors: onnxruntime runs it instead
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        log.warning("event=openvino-vad-unavailable reason=%r", reason)
        return
    module.get_vad_model = as_vad_model(model)


def speech_only(samples: np.ndarray, vad_options: Any) -> np.ndarray:
    """The speech in ``samples``, its chunks joined; an empty array when there is none."""
    from faster_whisper.vad import get_speech_timestamps

    if samples.size == 0:
        return samples
    chunks = get_speech_timestamps(samples, vad_options)
    if not chunks:
        return samples[:0]
    return np.concatenate([samples[chunk["start"] : chunk["end"]] for chunk in chunks])
