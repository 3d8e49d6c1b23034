"""Any audio file to 16 kHz mono samples: a strict WAV clip as it is, anything else through
PyAV (FFmpeg's decoders, installed with faster-whisper), and libsndfile (``soundfile``, when
installed) for what PyAV cannot open. Every rate and channel count is resampled and mixed down
to 16 kHz mono by FFmpeg's resampler. PyAV is imported when a file needs it."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np

from byoa_skills.recordings.errors import RecordingError
from byoa_skills.wav import SAMPLE_RATE, Clip, WavError, max_frames, parse_wav

#: The longest recording taken by default, in seconds (one hour).
DEFAULT_MAX_SECONDS = 3600.0


@dataclass(frozen=True)
class Recording(Clip):
    """Decoded audio: a :class:`Clip` of any length (little-endian int16 samples at 16 kHz,
    mono), and what it was decoded from (``decoder``: ``wav``, ``pyav`` or ``soundfile``)."""

    decoder: str = "wav"


def decode_audio(data: bytes, max_seconds: float = DEFAULT_MAX_SECONDS) -> Recording:
    """The 16 kHz mono samples of the audio file ``data``, in any format PyAV or libsndfile
    reads, at any rate and channel count.

    Raises :class:`RecordingError`: ``audio-too-long`` as soon as more than ``max_seconds``
    are decoded, ``audio-undecodable`` when no decoder reads it. A file that holds an audio
    stream with nothing in it gives an empty recording.
    """
    limit = max_frames(max_seconds)
    try:  # the clip format the sites send: taken as it is, no resampling
        clip = parse_wav(data, max_seconds=max_seconds)
        return Recording(clip.samples, "wav")
    except WavError as refused:
        if refused.code == "too-long":
            raise _too_long(max_seconds) from None
    try:
        return Recording(_pyav(data, limit, max_seconds), "pyav")
    except RecordingError as error:
        if error.code != "audio-undecodable":
            raise
        why = error.message
    samples = _soundfile(data, limit, max_seconds)
    if samples is None:
        raise RecordingError("audio-undecodable", why)
    return Recording(samples, "soundfile")


def _pyav(data: bytes, limit: int, max_seconds: float) -> np.ndarray:
    import av

    try:
        with av.open(io.BytesIO(data), mode="r", metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise RecordingError("audio-undecodable", "the file holds no audio stream")
            resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
            parts: list[np.ndarray] = []
            total = 0
            for frame in container.decode(audio=0):
                for out in resampler.resample(frame):
                    total = _keep(parts, out.to_ndarray().reshape(-1), total, limit, max_seconds)
            for out in resampler.resample(None):
                total = _keep(parts, out.to_ndarray().reshape(-1), total, limit, max_seconds)
    except RecordingError:
        raise
    except (av.FFmpegError, ValueError, OSError, EOFError) as error:
        raise RecordingError("audio-undecodable", _one_line(error)) from None
    return _joined(parts)


def _soundfile(data: bytes, limit: int, max_seconds: float) -> np.ndarray | None:
    """The samples libsndfile reads, resampled by FFmpeg; None when it cannot read them."""
    try:
        import soundfile
    except (ImportError, OSError):
        return None
    try:
        info = soundfile.info(io.BytesIO(data))
        if info.frames > limit * info.samplerate / SAMPLE_RATE + info.samplerate:
            raise _too_long(max_seconds)
        audio, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except RecordingError:
        raise
    except (RuntimeError, ValueError, TypeError, OSError):  # soundfile.LibsndfileError included
        return None
    return _resampled(audio.mean(axis=1), int(rate), limit, max_seconds)


def _resampled(mono: np.ndarray, rate: int, limit: int, max_seconds: float) -> np.ndarray:
    import av

    resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
    frame = av.AudioFrame.from_ndarray(mono.reshape(1, -1).astype(np.float32), format="flt",
                                       layout="mono")  # fmt: skip
    frame.sample_rate = rate
    parts: list[np.ndarray] = []
    total = 0
    for out in [*resampler.resample(frame), *resampler.resample(None)]:
        total = _keep(parts, out.to_ndarray().reshape(-1), total, limit, max_seconds)
    return _joined(parts)


def _keep(parts: list[np.ndarray], samples: Any, total: int, limit: int, seconds: float) -> int:
    total += len(samples)
    if total > limit:
        raise _too_long(seconds)
    parts.append(np.asarray(samples, dtype="<i2"))
    return total


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype="<i2")


def _too_long(max_seconds: float) -> RecordingError:
    return RecordingError("audio-too-long", f"the recording is longer than {max_seconds:g} s")


def _one_line(error: BaseException) -> str:
    why = getattr(error, "strerror", None) or str(error)
    return "no decoder reads it: " + (" ".join(str(why).split()) or type(error).__name__)[:200]
