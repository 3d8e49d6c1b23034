"""The Silero VAD on a 15 s real-speech clip and on a 3 s one: onnxruntime (faster-whisper's
own) against OpenVINO (what a worker whose encoder is OpenVINO runs).

    pytest benchmarks/test_vad_speed.py -n 0 --benchmark-enable
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile

from byoa_skills.runtimes.speech.vad_openvino import OpenVINOSileroVAD, model_path

REALSPEECH = Path(__file__).parent.parent / "tests" / "data" / "realspeech"


def _padded(seconds: float) -> np.ndarray:
    """The real clips joined and cut to ``seconds``, padded as faster-whisper pads them."""
    joined = np.concatenate(
        [soundfile.read(path, dtype="float32")[0] for path in sorted(REALSPEECH.glob("*.flac"))]
    )
    audio = joined[: int(seconds * 16000)]
    return np.pad(audio, (0, 512 - audio.size % 512))


@pytest.fixture(scope="module")
def runtimes() -> dict[str, object]:
    from faster_whisper.vad import SileroVADModel

    return {"onnxruntime": SileroVADModel(str(model_path())), "openvino": OpenVINOSileroVAD()}


@pytest.mark.parametrize("seconds", [3.0, 15.0])
@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
@pytest.mark.benchmark(group="vad")
def test_the_vad_on_real_speech(benchmark, runtimes, runtime: str, seconds: float) -> None:  # type: ignore[no-untyped-def]
    audio = _padded(seconds)
    model = runtimes[runtime]
    probabilities = benchmark(lambda: model(audio.copy()))
    assert probabilities.shape == (audio.size // 512,)
    assert probabilities.min() >= 0.0 and probabilities.max() <= 1.0
