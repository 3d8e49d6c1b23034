"""Property tests: round trips, and mutated files only ever raise WavError with a known code,
in time linear in their length."""

from __future__ import annotations

import base64
import sys
from collections.abc import Callable

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from wavkit import chunk, extensible_fmt_body, fmt_body, riff

import byoa_skills.wav.parse as parse_module
from byoa_skills.wav import (
    CODES,
    WavError,
    clip_from_skill_input,
    float_to_int16,
    parse_wav,
    wav_from_float,
    wav_from_int16,
)

int16_clips = arrays(np.int16, st.integers(1, 4000), elements=st.integers(-32768, 32767))
float_clips = arrays(
    np.float32,
    st.integers(1, 2000),
    elements=st.floats(-2, 2, width=32) | st.just(float("nan")),
)


@given(int16_clips)
def test_int16_round_trip_is_sample_exact(samples: np.ndarray) -> None:
    clip = parse_wav(wav_from_int16(samples))
    assert clip.frames == len(samples)
    assert np.array_equal(clip.samples, samples)


@given(int16_clips)
def test_round_trip_through_the_skill_input(samples: np.ndarray) -> None:
    text = base64.b64encode(wav_from_int16(samples)).decode()
    clip = clip_from_skill_input({"audio": {"mime": "audio/wav", "base64": text}})
    assert np.array_equal(clip.samples, samples)


@given(float_clips)
def test_float_writer_round_trip(samples: np.ndarray) -> None:
    clip = parse_wav(wav_from_float(samples))
    expected = float_to_int16(samples)
    assert np.array_equal(clip.samples, expected)
    # within one step of the clamped input, NaN read as silence
    clamped = np.clip(np.nan_to_num(samples.astype(np.float64)), -1, 1)
    assert np.all(np.abs(clip.to_float32() - clamped) <= 2 / 32767)


@st.composite
def valid_files(draw: st.DrawFn) -> bytes:
    """Valid files with a variety of layouts: plain or extensible fmt, extra chunks, order."""
    frames = draw(st.integers(1, 800))
    pcm = draw(st.binary(min_size=frames * 2, max_size=frames * 2))
    fmt = chunk(b"fmt ", draw(st.sampled_from([fmt_body(), extensible_fmt_body()])))
    extras = [
        chunk(
            draw(st.sampled_from([b"LIST", b"fact", b"junk", b"cue "])), draw(st.binary(max_size=9))
        )
        for _ in range(draw(st.integers(0, 3)))
    ]
    chunks = draw(st.permutations([fmt, *extras]))
    after_fmt = chunks.index(fmt) + 1
    chunks.insert(draw(st.integers(after_fmt, len(chunks))), chunk(b"data", pcm))
    return riff(*chunks)


@st.composite
def mutated_files(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(valid_files()))
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete", "extend"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=12))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 12))]
        else:
            data += draw(st.binary(min_size=1, max_size=12))
    return bytes(data)


@given(valid_files())
def test_valid_layouts_are_accepted(data: bytes) -> None:
    clip = parse_wav(data)
    assert clip.frames >= 1


def outcome(data: bytes) -> str:
    """``ok`` or the code; any other exception fails the test."""
    try:
        parse_wav(data)
    except WavError as error:
        assert error.code in CODES
        assert error.message and "\n" not in error.message
        return error.code
    return "ok"


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_files())
def test_mutations_only_raise_known_codes(data: bytes) -> None:
    outcome(data)


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_only_raise_known_codes(data: bytes) -> None:
    outcome(data)
    outcome(b"RIFF" + data)
    outcome(b"RIFF" + len(data).to_bytes(4, "little") + b"WAVE" + data[4:])


@settings(max_examples=300)
@given(st.text(max_size=200))
def test_arbitrary_text_only_raises_known_codes(text: str) -> None:
    try:
        clip_from_skill_input({"audio": {"mime": "audio/wav", "base64": text}})
    except WavError as error:
        assert error.code in CODES


def executed_lines(call: Callable[[], object]) -> int:
    """How many lines of the parser module ran during ``call``: a count, not a clock."""
    count = 0
    target = parse_module.__file__

    def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
        nonlocal count
        if frame.f_code.co_filename != target:
            return None
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        call()
    except WavError:
        pass
    finally:
        sys.settrace(None)
    return count


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_files())
def test_work_is_linear_in_the_input_length(data: bytes) -> None:
    # Each chunk header moves the walk at least 8 bytes forward; a fixed number of lines per
    # chunk and a fixed overhead bound the work, whatever the sample count.
    lines = executed_lines(lambda: parse_wav(data))
    assert lines <= 60 + 25 * (len(data) // 8 + 1)


def test_many_tiny_chunks_stay_linear() -> None:
    tiny = b"".join(chunk(b"junk", b"") for _ in range(5000))
    data = riff(chunk(b"fmt ", fmt_body()), tiny, chunk(b"data", b"\0\0"))
    lines = executed_lines(lambda: parse_wav(data))
    assert parse_wav(data).frames == 1
    assert lines <= 60 + 25 * (len(data) // 8 + 1)


def test_work_does_not_grow_with_the_samples() -> None:
    short = executed_lines(lambda: parse_wav(wav_from_int16(np.zeros(10, np.int16))))
    long = executed_lines(lambda: parse_wav(wav_from_int16(np.zeros(16000 * 15, np.int16))))
    assert long == short
