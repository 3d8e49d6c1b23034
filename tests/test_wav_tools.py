"""Files written by sox and by soundfile (libsndfile), in the skill's format and in others."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile

from byoa_skills.wav import WavError, parse_wav

SOX_CASES = [
    # (name, sox output options, expected code or None for accepted)
    ("16k-mono-s16", ["-r", "16000", "-c", "1", "-b", "16", "-e", "signed-integer"], None),
    ("16k-mono-s16-wavpcm", ["-t", "wavpcm", "-r", "16000", "-c", "1", "-b", "16"], None),
    ("stereo", ["-r", "16000", "-c", "2", "-b", "16", "-e", "signed-integer"], "not-mono"),
    ("44k", ["-r", "44100", "-c", "1", "-b", "16", "-e", "signed-integer"], "wrong-rate"),
    ("8k", ["-r", "8000", "-c", "1", "-b", "16", "-e", "signed-integer"], "wrong-rate"),
    ("u8", ["-r", "16000", "-c", "1", "-b", "8", "-e", "unsigned-integer"], "wrong-bits"),
    ("s24", ["-r", "16000", "-c", "1", "-b", "24", "-e", "signed-integer"], "wrong-bits"),
    ("s32", ["-r", "16000", "-c", "1", "-b", "32", "-e", "signed-integer"], "wrong-bits"),
    ("float", ["-r", "16000", "-c", "1", "-b", "32", "-e", "floating-point"], "not-pcm"),
    ("ulaw", ["-r", "16000", "-c", "1", "-e", "u-law"], "not-pcm"),
    ("ima-adpcm", ["-r", "16000", "-c", "1", "-e", "ima-adpcm"], "not-pcm"),
    ("big-endian", ["-r", "16000", "-c", "1", "-b", "16", "--endian", "big"], "not-riff"),
]


def sox_file(tmp_path: Path, name: str, options: list[str]) -> bytes:
    """A 1.5 s tone written by sox with these output options."""
    sox = shutil.which("sox")
    assert sox, "sox is needed for these tests (see README: set-up)"
    out = tmp_path / f"{name}.wav"
    subprocess.run(
        [sox, "-n", *options, str(out), "synth", "1.5", "sine", "440", "vol", "0.5"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return out.read_bytes()


@pytest.mark.parametrize(("name", "options", "code"), SOX_CASES, ids=[c[0] for c in SOX_CASES])
def test_sox_files(tmp_path: Path, name: str, options: list[str], code: str | None) -> None:
    data = sox_file(tmp_path, name, options)
    if code is None:
        clip = parse_wav(data)
        assert clip.frames == 24000
        reference, rate = soundfile.read(tmp_path / f"{name}.wav", dtype="int16")
        assert rate == 16000
        assert np.array_equal(clip.samples, reference)
    else:
        with pytest.raises(WavError) as caught:
            parse_wav(data)
        assert caught.value.code == code


def test_sox_truncated_file(tmp_path: Path) -> None:
    data = sox_file(tmp_path, "cut", SOX_CASES[0][1])
    with pytest.raises(WavError) as caught:
        parse_wav(data[: len(data) - 101])
    assert caught.value.code == "truncated"


SOUNDFILE_CASES = [
    # (name, channels, rate, format, subtype, expected code or None)
    ("pcm16", 1, 16000, "WAV", "PCM_16", None),
    ("wavex-pcm16", 1, 16000, "WAVEX", "PCM_16", None),
    ("pcm16-stereo", 2, 16000, "WAV", "PCM_16", "not-mono"),
    ("wavex-stereo", 2, 16000, "WAVEX", "PCM_16", "not-mono"),
    ("pcm16-22k", 1, 22050, "WAV", "PCM_16", "wrong-rate"),
    ("pcm24", 1, 16000, "WAV", "PCM_24", "wrong-bits"),
    ("wavex-pcm24", 1, 16000, "WAVEX", "PCM_24", "wrong-bits"),
    ("float", 1, 16000, "WAV", "FLOAT", "not-pcm"),
    ("wavex-float", 1, 16000, "WAVEX", "FLOAT", "not-pcm"),
    ("double", 1, 16000, "WAV", "DOUBLE", "not-pcm"),
    ("alaw", 1, 16000, "WAV", "ALAW", "not-pcm"),
    ("rf64", 1, 16000, "RF64", "PCM_16", "not-riff"),
]


@pytest.mark.parametrize(
    ("name", "channels", "rate", "container", "subtype", "code"),
    SOUNDFILE_CASES,
    ids=[c[0] for c in SOUNDFILE_CASES],
)
def test_soundfile_files(
    tmp_path: Path,
    name: str,
    channels: int,
    rate: int,
    container: str,
    subtype: str,
    code: str | None,
) -> None:
    rng = np.random.default_rng(3)
    samples = rng.integers(-20000, 20000, size=(rate, channels), dtype=np.int16)
    path = tmp_path / f"{name}.wav"
    soundfile.write(path, samples, rate, format=container, subtype=subtype)
    data = path.read_bytes()
    if code is None:
        clip = parse_wav(data)
        assert np.array_equal(clip.samples, samples[:, 0])
    else:
        with pytest.raises(WavError) as caught:
            parse_wav(data)
        assert caught.value.code == code


def test_soundfile_with_metadata_chunks(tmp_path: Path) -> None:
    path = tmp_path / "tagged.wav"
    samples = np.arange(-800, 800, dtype=np.int16)
    with soundfile.SoundFile(path, "w", 16000, 1, "PCM_16", format="WAV") as file:
        file.title = "A clip with a title"
        file.artist = "odd"
        file.write(samples)
    data = path.read_bytes()
    assert b"LIST" in data
    assert np.array_equal(parse_wav(data).samples, samples)
