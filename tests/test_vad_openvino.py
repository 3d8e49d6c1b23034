"""The Silero VAD run on OpenVINO in a worker whose encoder is OpenVINO: it cuts every
committed clip exactly where onnxruntime cuts it, runs a handful of shapes whatever the
clip's length, and spares that worker onnxruntime; where it cannot be compiled onnxruntime
runs it. Real models and real speech, no mocks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

from byoa_skills.models import model_path
from byoa_skills.runtimes.speech import DecodeOptions
from byoa_skills.runtimes.speech.vad_openvino import (
    LONGEST_FRAMES,
    SMALLEST_BATCH,
    OpenVINOSileroVAD,
    padded_frames,
)
from byoa_skills.runtimes.speech.vad_openvino import (
    model_path as vad_model_path,
)

DATA = Path(__file__).parent / "data"
RECORDINGS = sorted((DATA / "realspeech").glob("*.flac")) + sorted((DATA / "speech").glob("*.wav"))


@pytest.fixture(scope="module")
def both() -> tuple[object, OpenVINOSileroVAD]:
    """faster-whisper's own onnxruntime model and the OpenVINO one, side by side."""
    from faster_whisper.vad import SileroVADModel

    return SileroVADModel(str(vad_model_path())), OpenVINOSileroVAD()


def _audio(path: Path) -> np.ndarray:
    samples, _ = soundfile.read(path, dtype="float32", always_2d=True)
    return np.ascontiguousarray(samples.mean(axis=1), dtype=np.float32)


def test_padded_frames_are_a_few_powers_of_two_that_hold_the_audio() -> None:
    sizes = {padded_frames(frames) for frames in range(1, 2000)}
    assert all(padded_frames(frames) >= frames for frames in range(1, 2000))
    assert sizes == {SMALLEST_BATCH * 2**k for k in range(8)}  # 16 to 2048


def test_the_openvino_vad_cuts_every_clip_where_onnxruntime_does(
    both: tuple[object, OpenVINOSileroVAD], monkeypatch: pytest.MonkeyPatch
) -> None:
    import faster_whisper.vad as fw_vad

    onnx, openvino = both
    engine = DecodeOptions()  # the engine's own thresholds
    options = fw_vad.VadOptions(
        threshold=engine.vad_threshold,
        min_silence_duration_ms=engine.vad_min_silence_ms,
        speech_pad_ms=engine.vad_speech_pad_ms,
    )
    assert len(RECORDINGS) > 100
    for path in RECORDINGS:
        audio = _audio(path)
        padded = np.pad(audio, (0, 512 - audio.size % 512))
        expected, got = onnx(padded.copy()), openvino(padded.copy())
        assert got.shape == expected.shape
        assert np.abs(got - expected).max() < 1e-4, path.name
        cuts = {}
        for name, model in (("onnxruntime", onnx), ("openvino", openvino)):
            monkeypatch.setattr(fw_vad, "get_vad_model", lambda model=model: model)
            cuts[name] = fw_vad.get_speech_timestamps(audio, options)
        assert cuts["openvino"] == cuts["onnxruntime"], path.name
    assert openvino.shapes_run <= {padded_frames(n) for n in range(1, LONGEST_FRAMES + 1)}
    assert len(openvino.shapes_run) <= 6


def test_a_window_runs_on_openvino_and_longer_audio_on_onnxruntime(
    both: tuple[object, OpenVINOSileroVAD],
) -> None:
    """A 30 s window is the longest audio OpenVINO runs; a long recording's span goes to
    faster-whisper's own model, loaded then, and gives the same probabilities."""
    onnx, _ = both
    openvino = OpenVINOSileroVAD()
    joined = np.concatenate([_audio(path) for path in RECORDINGS])
    for seconds, on_openvino in ((30.0, True), (60.0, False), (330.0, False)):
        audio = joined[: int(seconds * 16000)]
        padded = np.pad(audio, (0, 512 - audio.size % 512))
        before = set(openvino.shapes_run)
        expected, got = onnx(padded.copy()), openvino(padded.copy())
        assert got.shape == expected.shape
        assert np.abs(got - expected).max() < 1e-4, seconds
        assert (openvino.shapes_run != before) is on_openvino, seconds
    assert openvino.shapes_run == {LONGEST_FRAMES}


def test_the_openvino_vad_leaves_its_callers_audio_as_it_was(
    both: tuple[object, OpenVINOSileroVAD],
) -> None:
    _, openvino = both
    audio = _audio(RECORDINGS[0])
    audio = np.pad(audio, (0, 512 - audio.size % 512))
    kept = audio.copy()
    openvino(audio)
    assert np.array_equal(audio, kept)
    with pytest.raises(ValueError):
        openvino(audio[:-1])


def _worker_probe(model_dir: Path, encoder: str, vad_file: str = "") -> dict[str, object]:
    """Load a backend as a worker does, in a fresh process, and transcribe the JFK clip."""
    probe = f"""
import json, logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
from byoa_skills.runtimes.speech import load_backend
from byoa_skills.runtimes.speech import vad_openvino
from byoa_skills.runtimes.speech.vad import vad_runtime
from speech import samples
if {vad_file!r}:
    vad_openvino.model_path = lambda: {vad_file!r}
backend = load_backend({str(model_dir)!r}, model_name="tiny.en", cpu_threads=1,
                       encoder_backend={encoder!r})
text = backend.transcribe(samples("jfk.wav"), "en").text
print(json.dumps({{"onnxruntime": "onnxruntime" in sys.modules, "vad": vad_runtime(),
                  "encoder": backend.encoder.label, "text": text}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        cwd=Path(__file__).parent,
    )
    said = json.loads(done.stdout.splitlines()[-1])
    said["log"] = done.stderr
    return said


@pytest.fixture(scope="module")
def tiny_dir(engine_home: Path) -> Path:
    return model_path("tiny.en", cache_dir=engine_home / "cache" / "models")


def test_a_worker_whose_encoder_is_openvino_runs_its_vad_without_onnxruntime(
    tiny_dir: Path,
) -> None:
    said = _worker_probe(tiny_dir, "openvino-f32")
    assert said["encoder"].startswith("openvino"), said
    assert said["vad"] == "openvino"
    assert said["onnxruntime"] is False
    assert "ask not what your country can do for you" in said["text"].lower()


def test_a_worker_on_ctranslate2s_encoder_keeps_onnxruntimes_vad(tiny_dir: Path) -> None:
    said = _worker_probe(tiny_dir, "ctranslate2")
    assert said["vad"] == "onnxruntime" and said["onnxruntime"] is True
    assert "ask not what your country can do for you" in said["text"].lower()


def test_a_vad_openvino_cannot_compile_runs_on_onnxruntime(tiny_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "silero.onnx"
    broken.write_bytes(b"not an onnx model")
    said = _worker_probe(tiny_dir, "openvino-f32", vad_file=str(broken))
    assert said["encoder"].startswith("openvino"), said
    assert said["vad"] == "onnxruntime" and said["onnxruntime"] is True
    assert "event=openvino-vad-unavailable" in said["log"]
    assert "ask not what your country can do for you" in said["text"].lower()
