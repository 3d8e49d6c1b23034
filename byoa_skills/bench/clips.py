"""The clips every scenario uses: about 1 s, 5 s and 15 s of real speech, as int16 samples."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import numpy as np

from byoa_skills.wav import parse_wav, wav_from_int16

#: Where the speech recordings are looked for unless ``BYOA_BENCH_SPEECH`` names a folder.
SPEECH_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "speech"
LABELS = ("1s", "5s", "15s")
SAMPLE_RATE = 16000


def _read(path: Path) -> np.ndarray:
    return parse_wav(path.read_bytes()).samples.copy()


def speech_dir() -> Path:
    """The folder the clips come from."""
    return Path(os.environ.get("BYOA_BENCH_SPEECH", SPEECH_DIR))


def load_clips() -> tuple[dict[str, np.ndarray], str]:
    """``({"1s": ..., "5s": ..., "15s": ...}, source)``: en-hello.wav, en-fox.wav, and jfk.wav
    followed by en-fox.wav cut at 15 s. Without those recordings (an installed package), the
    short spoken warm-up clip shipped with the engine is repeated to each length instead."""
    folder = speech_dir()
    names = ("en-hello.wav", "en-fox.wav", "jfk.wav")
    if all((folder / name).is_file() for name in names):
        hello, fox, jfk = (_read(folder / name) for name in names)
        fifteen = np.concatenate([jfk, fox])[: 15 * SAMPLE_RATE]
        return {"1s": hello, "5s": fox, "15s": fifteen}, str(folder)
    warm = _read(Path(__file__).resolve().parents[1] / "pool" / "warmup.wav")
    clips = {}
    for label, seconds in zip(LABELS, (1, 5, 15), strict=True):
        repeats = -(-seconds * SAMPLE_RATE // len(warm))
        clips[label] = np.tile(warm, repeats)[: seconds * SAMPLE_RATE]
    return clips, "byoa_skills/pool/warmup.wav (repeated)"


def wav_bytes(samples: np.ndarray) -> bytes:
    """The clip as a WAV file."""
    return wav_from_int16(samples)


def skill_body(samples: np.ndarray, language: str = "en") -> dict[str, object]:
    """The body of one ``audio.transcribe`` call on the local API."""
    audio = {"mime": "audio/wav", "base64": base64.b64encode(wav_from_int16(samples)).decode()}
    return {"input": {"audio": audio}, "params": {"language": language}}


def mix(clips: dict[str, np.ndarray], calls: int) -> list[str]:
    """``calls`` clip labels cycling 1 s, 5 s, 15 s: the mixed load of the throughput runs."""
    return [LABELS[i % len(LABELS)] for i in range(calls)]
