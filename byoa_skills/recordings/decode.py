"""Any audio file to 16 kHz mono samples, in bounded blocks: a strict WAV clip as it is,
anything else through PyAV (FFmpeg's decoders, installed with faster-whisper), and libsndfile
(``soundfile``, when installed) for what PyAV cannot open. Every rate and channel count is
resampled and mixed down to 16 kHz mono by FFmpeg's resampler. PyAV is imported when a file
needs it.

A file is decoded twice, never held whole: :func:`open_audio` decodes it once, keeping only
a count, to find the decoder that reads it and its exact length (so a file too long or
unreadable is refused before any of it is transcribed); :meth:`AudioFile.blocks` decodes it
again and hands its samples on :data:`BLOCK_FRAMES` at a time.

Both decodes can be stopped: given a :class:`~byoa_skills.recordings.work.Stop`, they look at
it after each decoded frame (a few milliseconds of work) and raise
:class:`~byoa_skills.recordings.work.Stopped` once it is set.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from byoa_skills.recordings.errors import RecordingError
from byoa_skills.recordings.work import Stop
from byoa_skills.wav import SAMPLE_RATE, Clip, WavError, max_frames, parse_wav

#: The longest recording taken by default, in seconds (one hour).
DEFAULT_MAX_SECONDS = 3600.0
#: The samples :meth:`AudioFile.blocks` hands on at a time by default (10 s).
BLOCK_FRAMES = 10 * SAMPLE_RATE
#: The samples libsndfile reads at a time, in the file's own frames.
_SOUNDFILE_FRAMES = 64 * 1024


@dataclass(frozen=True)
class Recording(Clip):
    """Decoded audio: a :class:`Clip` of any length (little-endian int16 samples at 16 kHz,
    mono), and what it was decoded from (``decoder``: ``wav``, ``pyav`` or ``soundfile``)."""

    decoder: str = "wav"


@dataclass(frozen=True)
class AudioFile:
    """An audio file that one decoder reads from start to end: its bytes, the decoder
    (``wav``, ``pyav`` or ``soundfile``) and how many 16 kHz mono frames it decodes to,
    counted by decoding it (never taken from its header)."""

    data: bytes
    decoder: str
    frames: int
    #: The longest recording taken, in seconds: the second decode holds to it too.
    max_seconds: float = DEFAULT_MAX_SECONDS

    @property
    def seconds(self) -> float:
        """Duration, ``frames / 16000``."""
        return self.frames / SAMPLE_RATE

    def blocks(self, frames: int = BLOCK_FRAMES, stop: Stop | None = None) -> Iterator[np.ndarray]:
        """The file's samples decoded again (little-endian int16, 16 kHz, mono), in order, in
        blocks of ``frames`` (the last one shorter); a WAV clip's blocks are views on
        :attr:`data`. Raises :class:`RecordingError` as :func:`open_audio` does, and
        :class:`~byoa_skills.recordings.work.Stopped` at the next decoded frame once ``stop``
        is set."""
        stop = stop or Stop()
        if self.decoder == "wav":
            samples = parse_wav(self.data, max_seconds=self.max_seconds).samples
            for start in range(0, len(samples), frames):
                stop.check()
                yield samples[start : start + frames]
            return
        decoded = _pyav(self.data, stop) if self.decoder == "pyav" else _soundfile(self.data, stop)
        yield from _rebatched(_bounded(decoded, self.max_seconds), frames)


def open_audio(
    data: bytes, max_seconds: float = DEFAULT_MAX_SECONDS, stop: Stop | None = None
) -> AudioFile:
    """The audio file ``data``, in any format PyAV or libsndfile reads, at any rate and
    channel count, decoded once to count its 16 kHz mono frames (one decoded frame is held
    at a time).

    Raises :class:`RecordingError`: ``audio-too-long`` as soon as more than ``max_seconds``
    are decoded, ``audio-undecodable`` when no decoder reads it. A file that holds an audio
    stream with nothing in it has no frames. Raises
    :class:`~byoa_skills.recordings.work.Stopped` at the next decoded frame once ``stop`` is
    set.
    """
    stop = stop or Stop()
    try:  # the clip format the sites send: taken as it is, no resampling
        clip = parse_wav(data, max_seconds=max_seconds)
        return AudioFile(data, "wav", clip.frames, max_seconds)
    except WavError as refused:
        if refused.code == "too-long":
            raise _too_long(max_seconds) from None
    try:
        return AudioFile(data, "pyav", _counted(_pyav(data, stop), max_seconds), max_seconds)
    except RecordingError as error:
        if error.code != "audio-undecodable":
            raise
        why = error.message
    if not _soundfile_reads(data, max_seconds):
        raise RecordingError("audio-undecodable", why)
    try:
        frames = _counted(_soundfile(data, stop), max_seconds)
        return AudioFile(data, "soundfile", frames, max_seconds)
    except RecordingError as error:
        if error.code != "audio-undecodable":
            raise
        raise RecordingError("audio-undecodable", why) from None


def decode_audio(data: bytes, max_seconds: float = DEFAULT_MAX_SECONDS) -> Recording:
    """The whole recording ``data`` as one :class:`Recording` (a WAV clip's samples are a
    view on ``data``). It holds every sample at once: long files go through
    :func:`open_audio` and :meth:`AudioFile.blocks` instead. Raises as :func:`open_audio`."""
    audio = open_audio(data, max_seconds)
    if audio.decoder == "wav":
        return Recording(parse_wav(data, max_seconds=max_seconds).samples, "wav")
    return Recording(_joined(list(audio.blocks())), audio.decoder)


def _pyav(data: bytes, stop: Stop) -> Iterator[np.ndarray]:
    """The samples PyAV decodes and resamples, as it decodes them; ``stop`` looked at after
    each decoded frame."""
    import av

    try:
        with av.open(io.BytesIO(data), mode="r", metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise RecordingError("audio-undecodable", "the file holds no audio stream")
            resampler = _resampler()
            for frame in container.decode(audio=0):
                stop.check()
                for out in resampler.resample(frame):
                    yield out.to_ndarray().reshape(-1)
            for out in resampler.resample(None):
                yield out.to_ndarray().reshape(-1)
    except RecordingError:
        raise
    except (av.FFmpegError, ValueError, OSError, EOFError) as error:
        raise RecordingError("audio-undecodable", _one_line(error)) from None


def _soundfile_reads(data: bytes, max_seconds: float) -> bool:
    """Whether libsndfile opens ``data``; ``audio-too-long`` at once when its header already
    says more than ``max_seconds`` (and a second)."""
    try:
        import soundfile
    except (ImportError, OSError):
        return False
    try:
        info = soundfile.info(io.BytesIO(data))
    except (RuntimeError, ValueError, TypeError, OSError):  # soundfile.LibsndfileError included
        return False
    limit = max_frames(max_seconds)
    if info.frames > limit * info.samplerate / SAMPLE_RATE + info.samplerate:
        raise _too_long(max_seconds)
    return True


def _soundfile(data: bytes, stop: Stop) -> Iterator[np.ndarray]:
    """The samples libsndfile reads, mixed to mono and resampled by FFmpeg, block by block;
    ``stop`` looked at after each block."""
    import av
    import soundfile

    try:
        with soundfile.SoundFile(io.BytesIO(data)) as file:
            rate = int(file.samplerate)
            resampler = _resampler()
            for block in file.blocks(_SOUNDFILE_FRAMES, dtype="float32", always_2d=True):
                stop.check()
                mono = block.mean(axis=1, dtype=np.float32).reshape(1, -1)
                frame = av.AudioFrame.from_ndarray(mono, format="flt", layout="mono")
                frame.sample_rate = rate
                for out in resampler.resample(frame):
                    yield out.to_ndarray().reshape(-1)
            for out in resampler.resample(None):
                yield out.to_ndarray().reshape(-1)
    except (RuntimeError, ValueError, TypeError, OSError, av.FFmpegError) as error:
        raise RecordingError("audio-undecodable", _one_line(error)) from None


def _resampler() -> Any:
    import av

    return av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)


def _bounded(parts: Iterable[np.ndarray], max_seconds: float) -> Iterator[np.ndarray]:
    """``parts`` as little-endian int16, ``audio-too-long`` once they pass ``max_seconds``."""
    limit, total = max_frames(max_seconds), 0
    for part in parts:
        total += len(part)
        if total > limit:
            raise _too_long(max_seconds)
        yield np.asarray(part, dtype="<i2")


def _counted(parts: Iterable[np.ndarray], max_seconds: float) -> int:
    return sum(len(part) for part in _bounded(parts, max_seconds))


def _rebatched(parts: Iterable[np.ndarray], frames: int) -> Iterator[np.ndarray]:
    """``parts`` joined and cut again into blocks of ``frames`` (the last one shorter)."""
    pending: list[np.ndarray] = []
    size = 0
    for part in parts:
        pending.append(part)
        size += len(part)
        if size >= frames:
            joined = _joined(pending)
            whole = len(joined) - len(joined) % frames
            for start in range(0, whole, frames):
                yield joined[start : start + frames]
            pending = [joined[whole:].copy()] if whole < len(joined) else []
            size = len(joined) - whole
    if size:
        yield _joined(pending)


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype="<i2")


def _too_long(max_seconds: float) -> RecordingError:
    return RecordingError("audio-too-long", f"the recording is longer than {max_seconds:g} s")


def _one_line(error: BaseException) -> str:
    why = getattr(error, "strerror", None) or str(error)
    return "no decoder reads it: " + (" ".join(str(why).split()) or type(error).__name__)[:200]
