"""A table of constructed files: each accepted variant, and each rejection code at least once."""

from __future__ import annotations

import numpy as np
import pytest
from wavkit import (
    FLOAT_GUID,
    chunk,
    extensible_fmt_body,
    fmt_body,
    pcm,
    riff,
    wav,
)

from byoa_skills.wav import CODES, WavError, parse_wav

FMT = chunk(b"fmt ", fmt_body())
DATA = chunk(b"data", pcm(1600))

ACCEPTED = {
    "plain 44-byte header": wav(),
    "one frame": riff(FMT, chunk(b"data", pcm(1))),
    "exactly 15 s": wav(15 * 16000),
    "extensible, PCM sub-format, front-centre mask": riff(
        chunk(b"fmt ", extensible_fmt_body()), DATA
    ),
    "extensible, no channel mask": riff(chunk(b"fmt ", extensible_fmt_body(mask=0)), DATA),
    "PCM fmt of 18 bytes with cbSize 0": riff(chunk(b"fmt ", fmt_body() + b"\0\0"), DATA),
    "LIST before data": riff(FMT, chunk(b"LIST", b"INFOISFT\x06\0\0\0sox\0\0\0"), DATA),
    "odd-sized chunk with its pad byte, after data": riff(FMT, DATA, chunk(b"junk", b"abc")),
    "fact chunk": riff(FMT, chunk(b"fact", b"\x40\x06\0\0"), DATA),
    "empty unknown chunk": riff(FMT, chunk(b"zero", b""), DATA),
}

REJECTED = [
    ("not-riff", b""),
    ("not-riff", b"RIF"),
    ("not-riff", b"RIFX" + wav()[4:]),
    ("not-riff", b"RF64" + wav()[4:]),
    ("not-riff", b"ID3\x04" + wav()),
    ("truncated", b"RIFF\x04\0\0\0WA"),
    ("not-wave", riff(FMT, DATA, form=b"AVI ")),
    ("truncated", wav()[:-1]),
    ("truncated", wav()[:40]),
    ("truncated", riff(FMT, DATA, riff_size=len(wav()))),
    ("truncated", riff(FMT, chunk(b"data", pcm(1600), size=3202))),
    ("truncated", riff(FMT, DATA, chunk(b"junk", b"abc", pad=False))),
    ("truncated", riff(FMT, DATA, b"LI")),
    ("trailing-bytes", wav() + b"\0"),
    ("trailing-bytes", wav() + wav()),
    ("duplicate-chunk", riff(FMT, FMT, DATA)),
    ("duplicate-chunk", riff(FMT, DATA, DATA)),
    ("missing-fmt", riff(DATA)),
    ("data-before-fmt", riff(DATA, FMT)),
    ("data-before-fmt", riff(chunk(b"LIST", b"abcd"), DATA, FMT)),
    ("missing-fmt", riff(chunk(b"FMT ", fmt_body()), DATA)),
    ("bad-fmt", riff(chunk(b"fmt ", fmt_body()[:14]), DATA)),
    ("bad-fmt", riff(chunk(b"fmt ", fmt_body() + b"\x02\0\0\0"), DATA)),
    ("bad-fmt", riff(chunk(b"fmt ", fmt_body() + b"\0\0\0\0"), DATA)),
    ("bad-fmt", riff(chunk(b"fmt ", extensible_fmt_body()[:38]), DATA)),
    ("bad-fmt", riff(chunk(b"fmt ", extensible_fmt_body(cb_size=20)), DATA)),
    (
        "not-pcm",
        riff(chunk(b"fmt ", fmt_body(tag=3, bits=32, byte_rate=64000, block_align=4)), DATA),
    ),
    ("not-pcm", riff(chunk(b"fmt ", fmt_body(tag=7, bits=8)), DATA)),
    ("not-pcm", riff(chunk(b"fmt ", extensible_fmt_body(guid=FLOAT_GUID)), DATA)),
    ("not-mono", riff(chunk(b"fmt ", fmt_body(channels=2, byte_rate=64000, block_align=4)), DATA)),
    ("not-mono", riff(chunk(b"fmt ", fmt_body(channels=0)), DATA)),
    ("not-mono", riff(chunk(b"fmt ", extensible_fmt_body(mask=3)), DATA)),
    ("wrong-rate", riff(chunk(b"fmt ", fmt_body(rate=44100, byte_rate=88200)), DATA)),
    ("wrong-rate", riff(chunk(b"fmt ", fmt_body(rate=8000, byte_rate=16000)), DATA)),
    ("wrong-bits", riff(chunk(b"fmt ", fmt_body(bits=8, block_align=1, byte_rate=16000)), DATA)),
    ("wrong-bits", riff(chunk(b"fmt ", fmt_body(bits=24, block_align=3, byte_rate=48000)), DATA)),
    ("wrong-bits", riff(chunk(b"fmt ", extensible_fmt_body(valid_bits=12)), DATA)),
    ("bad-block-align", riff(chunk(b"fmt ", fmt_body(block_align=4)), DATA)),
    ("bad-byte-rate", riff(chunk(b"fmt ", fmt_body(byte_rate=16000)), DATA)),
    ("missing-data", riff(FMT)),
    ("missing-data", riff(FMT, chunk(b"DATA", pcm(10)))),
    ("partial-frame", riff(FMT, chunk(b"data", pcm(10)[:-1]))),
    ("empty", riff(FMT, chunk(b"data", b""))),
    ("too-long", wav(15 * 16000 + 1)),
]


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted(name: str) -> None:
    data = ACCEPTED[name]
    clip = parse_wav(data)
    raw = data[data.index(b"data") + 8 :][: clip.frames * 2]
    assert clip.samples.dtype == np.dtype("<i2")
    assert clip.samples.tobytes() == raw
    assert clip.seconds == clip.frames / 16000


@pytest.mark.parametrize(
    ("code", "data"), REJECTED, ids=[f"{c}-{i}" for i, (c, _) in enumerate(REJECTED)]
)
def test_rejected(code: str, data: bytes) -> None:
    with pytest.raises(WavError) as caught:
        parse_wav(data)
    assert caught.value.code == code
    assert "\n" not in caught.value.message and caught.value.message


def test_every_parse_code_is_in_the_table() -> None:
    input_only = {"bad-input", "wrong-mime", "too-large", "bad-base64"}
    assert {code for code, _ in REJECTED} == set(CODES) - input_only


def test_samples_are_a_zero_copy_view() -> None:
    data = bytearray(wav(100))
    clip = parse_wav(data)
    at = data.index(b"data") + 8
    data[at : at + 2] = (1234).to_bytes(2, "little", signed=True)
    assert clip.samples[0] == 1234
    assert np.shares_memory(clip.samples, np.frombuffer(data, dtype=np.uint8))


def test_samples_from_bytes_are_read_only() -> None:
    clip = parse_wav(wav(10))
    assert not clip.samples.flags.writeable


def test_float32_conversion() -> None:
    samples = np.array([-32768, -1, 0, 1, 32767], dtype=np.int16)
    clip = parse_wav(riff(FMT, chunk(b"data", samples.astype("<i2").tobytes())))
    floats = clip.to_float32()
    assert floats.dtype == np.float32
    assert floats.tolist() == pytest.approx([-1.0, -1 / 32768, 0.0, 1 / 32768, 32767 / 32768])


@pytest.mark.parametrize(
    ("seconds", "frames", "ok"),
    [(1, 16000, True), (1, 16001, False), (0.5, 8000, True), (2.25, 36001, False)],
)
def test_caller_limit(seconds: float, frames: int, ok: bool) -> None:
    data = wav(frames)
    if ok:
        assert parse_wav(data, max_seconds=seconds).frames == frames
    else:
        with pytest.raises(WavError, match="too-long"):
            parse_wav(data, max_seconds=seconds)


@pytest.mark.parametrize("limit", [0, -1, float("nan"), float("inf")])
def test_a_nonsense_limit_is_a_programming_error(limit: float) -> None:
    with pytest.raises(ValueError) as caught:
        parse_wav(wav(), max_seconds=limit)
    assert not isinstance(caught.value, WavError)


def test_memoryview_and_bytearray_inputs() -> None:
    data = wav(321)
    assert parse_wav(memoryview(data)).frames == 321
    assert parse_wav(bytearray(data)).frames == 321
