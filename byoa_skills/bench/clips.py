"""The clips every scenario uses, as int16 samples: about 1 s, 5 s and 15 s of test speech by
label, and the mixed real clips of tests/data/realspeech in three length groups (about 1-2 s,
3-6 s, 6-15 s, several languages) that the throughput runs and the floor use."""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from byoa_skills.wav import parse_wav, wav_from_int16

#: Where the speech recordings are looked for unless ``BYOA_BENCH_SPEECH`` names a folder.
SPEECH_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "speech"
LABELS = ("1s", "5s", "15s")
SAMPLE_RATE = 16000
#: Where the real (human) speech clips are, with their languages and reference texts.
REAL_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "realspeech"
#: The clip-length groups of the real clips: name, and the seconds each clip lies between.
GROUPS = (("1-2s", 1.0, 2.0), ("3-6s", 3.0, 6.0), ("6-15s", 6.0, 15.0))
#: Real clips per group (fewer with ``--quick``).
PER_GROUP, QUICK_PER_GROUP = 6, 2


#: The parts of the real-speech set: decoding choices are made on "tune" and only measured on
#: "held-out" (tests/data/realspeech/README.md gives the rule that splits it).
PARTS = ("tune", "held-out")


def real_records(part: str | None = None, folder: Path | None = None) -> list[dict[str, Any]]:
    """The records of the real-speech set's ``clips.json`` (file, language, text, seconds,
    ``short``: a short answer of one to three words, ``part``, and the rest), in the file's
    order: those of one part (``"tune"`` or ``"held-out"``), or all of them with ``None``."""
    if part is not None and part not in PARTS:
        raise ValueError(f"part {part!r}: want one of {PARTS}")
    folder = folder or REAL_DIR
    records = json.loads((folder / "clips.json").read_text(encoding="utf-8"))
    return [r for r in records if part is None or r["part"] == part]


@dataclass(frozen=True)
class RealClip:
    """One real-speech clip of a length group: its samples, language and source file."""

    key: str
    group: str
    samples: np.ndarray
    language: str
    source: str

    @property
    def seconds(self) -> float:
        """Its length in seconds."""
        return len(self.samples) / SAMPLE_RATE


def _flac(path: Path) -> np.ndarray:
    import soundfile

    samples, rate = soundfile.read(path, dtype="int16")
    assert rate == SAMPLE_RATE and samples.ndim == 1, path
    return np.ascontiguousarray(samples)


def _quiet_cut(samples: np.ndarray, low: float, high: float) -> np.ndarray:
    """``samples`` cut at the quietest 20 ms between ``low`` and ``high`` seconds: a short
    piece of real speech that ends between words where it can."""
    frame = SAMPLE_RATE // 50
    start, stop = int(low * SAMPLE_RATE), min(len(samples), int(high * SAMPLE_RATE))
    energies = [
        float(np.abs(samples[i : i + frame].astype(np.int32)).mean())
        for i in range(start, stop - frame, frame)
    ]
    if not energies:
        return samples[:stop]
    return samples[: start + frame * int(np.argmin(energies)) + frame]


def real_groups(
    quick: bool = False, folder: Path | None = None, english_only: bool = False
) -> dict[str, list[RealClip]]:
    """The mixed real clips by length group: evenly spaced over each group's lengths (so
    over its languages too), in a fixed order.
    The 1-2 s group is the set's shortest clip and the first 1.2-2 s of others, cut at their
    quietest moment (the set has one clip that short; speech is speech for the clock); the
    6-15 s group adds JFK's 11 s recording from tests/data/speech. ``english_only``: only
    the English clips (for a model such as ``tiny.en``)."""
    folder = folder or REAL_DIR
    # the sentences only: the short answers added to the set (one to three words, under 2 s)
    # are the accuracy scenario's, and the length groups stay the ones measured before
    records = [r for r in real_records(folder=folder) if not r.get("short")]
    if english_only:
        records = [r for r in records if r["language"] == "en"]
    records.sort(key=lambda r: (r["seconds"], r["file"]))
    wanted = QUICK_PER_GROUP if quick else PER_GROUP
    groups: dict[str, list[RealClip]] = {}
    for name, low, high in GROUPS:
        inside = [r for r in records if low <= r["seconds"] <= high]
        if name == "1-2s":
            cut = [r for r in records if 3.0 <= r["seconds"] <= 6.0]
            inside += [dict(r, cut=True) for r in cut]
        chosen = _spread(inside, wanted)
        clips = []
        for index, record in enumerate(chosen):
            samples = _flac(folder / record["file"])
            if record.get("cut"):
                samples = _quiet_cut(samples, 1.2, 2.0)
            clips.append(
                RealClip(
                    f"{name}:{index}",
                    name,
                    samples,
                    record["language"],
                    record["file"] + (" (cut)" if record.get("cut") else ""),
                )
            )
        if name == "6-15s" and (speech_dir() / "jfk.wav").is_file():
            clips[-1:] = [
                RealClip(
                    f"{name}:{len(chosen) - 1}",
                    name,
                    _read(speech_dir() / "jfk.wav"),
                    "en",
                    "jfk.wav",
                )
            ]
        groups[name] = clips
    return groups


def _spread(records: list[dict[str, object]], wanted: int) -> list[dict[str, object]]:
    """Up to ``wanted`` of ``records`` (in length order), evenly spaced over their lengths."""
    if len(records) <= wanted:
        return list(records)
    if wanted == 1:
        return [records[len(records) // 2]]
    step = (len(records) - 1) / (wanted - 1)
    return [records[round(i * step)] for i in range(wanted)]


def real_mix(groups: dict[str, list[RealClip]], calls: int) -> list[str]:
    """``calls`` keys of the real clips, taking the groups in turn and each group's clips in
    turn: the mixed load of the throughput runs."""
    order = [clip.key for pair in zip(*groups.values(), strict=False) for clip in pair]
    left = [c.key for g in groups.values() for c in g if c.key not in order]
    order += left
    return [order[i % len(order)] for i in range(calls)]


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


def skill_body(samples: np.ndarray, language: str | None = "en") -> dict[str, object]:
    """The body of one ``audio.transcribe`` call on the local API."""
    audio = {"mime": "audio/wav", "base64": base64.b64encode(wav_from_int16(samples)).decode()}
    return {"input": {"audio": audio}, "params": {"language": language}}


def mix(clips: dict[str, np.ndarray], calls: int) -> list[str]:
    """``calls`` clip labels cycling 1 s, 5 s, 15 s: the mixed load of the throughput runs."""
    return [LABELS[i % len(LABELS)] for i in range(calls)]
