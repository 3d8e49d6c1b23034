"""Speed of reading a 15 s clip: our parser from base64 and from bytes, and soundfile.read.

Timed only with ``--benchmark-enable`` (the default run checks the results once):

    pytest benchmarks --benchmark-enable --benchmark-columns=min,median,mean,max,rounds
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import soundfile

from byoa_skills.wav import clip_from_skill_input, parse_wav, wav_from_int16

SAMPLES = np.random.default_rng(0).integers(-20000, 20000, 16000 * 15, dtype=np.int16)
DATA = wav_from_int16(SAMPLES)
SKILL_INPUT = {"audio": {"mime": "audio/wav", "base64": base64.b64encode(DATA).decode()}}


@pytest.mark.benchmark(group="15 s clip")
def test_parse_from_bytes(benchmark) -> None:  # type: ignore[no-untyped-def]
    clip = benchmark(parse_wav, DATA)
    assert np.array_equal(clip.samples, SAMPLES)


@pytest.mark.benchmark(group="15 s clip")
def test_parse_from_bytes_to_float32(benchmark) -> None:  # type: ignore[no-untyped-def]
    floats = benchmark(lambda: parse_wav(DATA).to_float32())
    assert floats.dtype == np.float32 and len(floats) == len(SAMPLES)


@pytest.mark.benchmark(group="15 s clip")
def test_parse_from_base64(benchmark) -> None:  # type: ignore[no-untyped-def]
    clip = benchmark(clip_from_skill_input, SKILL_INPUT)
    assert np.array_equal(clip.samples, SAMPLES)


@pytest.mark.benchmark(group="15 s clip")
def test_soundfile_read_of_the_same_bytes(benchmark) -> None:  # type: ignore[no-untyped-def]
    samples, rate = benchmark(lambda: soundfile.read(io.BytesIO(DATA), dtype="int16"))
    assert rate == 16000 and np.array_equal(samples, SAMPLES)
