"""The Silero VAD that faster-whisper ships, run on OpenVINO instead of onnxruntime.

A worker whose encoder is OpenVINO has OpenVINO's runtime loaded already; running the VAD on it
spares that worker onnxruntime's library and session (about 24 MiB of a worker's memory) and
runs the VAD about twice as fast. :class:`OpenVINOSileroVAD` reads faster-whisper's own model
file and answers as faster-whisper's ``SileroVADModel`` does: one speech probability for each
512-sample frame of the audio, all frames in one run.

OpenVINO keeps what it sets up for each input shape it has run, so a compiled model fed every
clip length would grow without end. The frames are therefore padded with silent frames to a
power of two (:func:`padded_frames`): a handful of shapes covers every clip and window. Frames
appended after the audio change nothing the model says about the frames before them, so the
probabilities are those of the unpadded run. It also keeps the buffers of the largest run
between calls, about twice what onnxruntime takes for a run and gives back: audio longer than
a window (:data:`LONGEST_FRAMES`), a long recording's span, goes to faster-whisper's own
onnxruntime model instead, loaded when first needed.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

#: The model faster-whisper's ``get_vad_model`` loads, in its package's assets folder.
MODEL_FILE = "silero_vad_v6.onnx"
#: The fewest frames a batch is padded to.
SMALLEST_BATCH = 16
#: The LSTM state the model starts from: ``h`` and ``c``, each of this shape.
STATE_SHAPE = (1, 1, 128)
#: The most frames run on OpenVINO: a 30 s window's 938, padded (32.8 s).
LONGEST_FRAMES = 1024


def padded_frames(frames: int) -> int:
    """How many frames a batch of ``frames`` frames is padded to: the smallest power of two
    that holds them, and at least :data:`SMALLEST_BATCH`."""
    size = SMALLEST_BATCH
    while size < frames:
        size *= 2
    return size


def model_path() -> Path:
    """faster-whisper's Silero model file (imports faster-whisper's ``utils``)."""
    from faster_whisper.utils import get_assets_path

    return Path(get_assets_path()) / MODEL_FILE


class OpenVINOSileroVAD:
    """faster-whisper's Silero VAD compiled by OpenVINO for the CPU, in float32, on
    ``threads`` threads (not pinned to cores); callers on several threads take turns.
    :attr:`shapes_run` holds the run sizes it has run. Raises OpenVINO's errors where the
    model file is missing or does not compile."""

    def __init__(self, path: str | os.PathLike[str] | None = None, threads: int = 1) -> None:
        from byoa_skills.runtimes.speech.openvino_runtime import import_openvino

        ov = import_openvino()
        core = ov.Core()
        self._compiled = core.compile_model(
            core.read_model(str(path or model_path())),
            "CPU",
            {
                "INFERENCE_PRECISION_HINT": "f32",
                "INFERENCE_NUM_THREADS": max(1, threads),
                "ENABLE_CPU_PINNING": False,
            },
        )
        self._request = self._compiled.create_infer_request()
        self._probabilities = self._compiled.output(0)
        self._one_at_a_time = threading.Lock()  # one infer request, callers on any thread
        self._onnxruntime: Any = None
        self.shapes_run: set[int] = set()

    def __call__(
        self, audio: np.ndarray, num_samples: int = 512, context_size_samples: int = 64
    ) -> np.ndarray:
        """The speech probability of each ``num_samples`` frame of the 1-D float32 ``audio``
        (its length a multiple of ``num_samples``), one value a frame, as faster-whisper's
        ``SileroVADModel`` gives it. Raises ``ValueError`` for audio of another shape."""
        if audio.ndim != 1 or audio.shape[0] % num_samples:
            raise ValueError("the VAD takes 1-D audio whose length is a multiple of its frame")
        if audio.shape[0] > LONGEST_FRAMES * num_samples:
            return self._longer(audio, num_samples, context_size_samples)
        frames = audio.reshape(-1, num_samples).astype(np.float32)  # a copy, as it is changed
        # faster-whisper's own: each frame is preceded by the end of the one before it (the
        # first by silence), and the last frame's end is silenced
        frames[-1, -context_size_samples:] = 0
        context = np.roll(frames[:, -context_size_samples:], 1, axis=0)
        batch = np.concatenate([context, frames], axis=1)
        count = batch.shape[0]
        silence = np.zeros((padded_frames(count) - count, batch.shape[1]), dtype=np.float32)
        state = np.zeros(STATE_SHAPE, dtype=np.float32)
        with self._one_at_a_time:
            self.shapes_run.add(count + silence.shape[0])
            run = np.concatenate([batch, silence])
            result = self._request.infer({"input": run, "h": state, "c": state})
            return np.array(result[self._probabilities][:count])

    def _longer(self, audio: np.ndarray, num_samples: int, context_size_samples: int) -> Any:
        """What faster-whisper's own onnxruntime model says of ``audio``."""
        with self._one_at_a_time:
            if self._onnxruntime is None:
                from faster_whisper.vad import SileroVADModel

                self._onnxruntime = SileroVADModel(str(model_path()))
        return self._onnxruntime(audio, num_samples, context_size_samples)


def as_vad_model(model: OpenVINOSileroVAD) -> Any:
    """A function that returns ``model``, in the shape of faster-whisper's ``get_vad_model``;
    its ``runtime`` attribute says ``openvino``."""

    def get_vad_model() -> OpenVINOSileroVAD:
        return model

    get_vad_model.runtime = "openvino"  # type: ignore[attr-defined]
    return get_vad_model
