"""The skill input object: its shape, the mime type, the size bound and strict base64."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from wavkit import wav

from byoa_skills.wav import (
    WavError,
    clip_from_skill_input,
    decode_strict,
    max_base64_length,
    wav_base64,
)

GOOD = base64.b64encode(wav(1600)).decode()


def audio(text: object = GOOD, mime: object = "audio/wav") -> dict[str, object]:
    return {"audio": {"mime": mime, "base64": text}}


def code_of(skill_input: object, **options: float) -> str:
    with pytest.raises(WavError) as caught:
        clip_from_skill_input(skill_input, **options)
    assert caught.value.message and "\n" not in caught.value.message
    return caught.value.code


def test_good_input() -> None:
    clip = clip_from_skill_input(audio())
    assert clip.frames == 1600
    assert clip.seconds == 0.1


@pytest.mark.parametrize("mime", ["audio/wav", "AUDIO/WAV", "Audio/Wav"])
def test_mime_letter_case_is_ignored(mime: str) -> None:
    assert clip_from_skill_input(audio(mime=mime)).frames == 1600


@pytest.mark.parametrize(
    "skill_input",
    [
        None,
        "UklGR",
        [],
        {},
        {"audio": None},
        {"audio": "UklGR"},
        {"audio": {"mime": "audio/wav"}},
        {"audio": {"base64": GOOD}},
        {"audio": {"mime": "audio/wav", "base64": None}},
        {"audio": {"mime": "audio/wav", "base64": 12}},
        {"audio": {"mime": "audio/wav", "base64": ["AAAA"]}},
        {"audio": {"mime": 1, "base64": GOOD}},
        {"audio": {"mime": "audio/wav", "base64": GOOD.encode()}},
    ],
)
def test_bad_shapes(skill_input: object) -> None:
    assert code_of(skill_input) == "bad-input"


@pytest.mark.parametrize(
    "mime", ["audio/x-wav", "audio/wave", "audio/mpeg", "", "audio/wav; codecs=1", "x" * 10_000]
)
def test_wrong_mime(mime: str) -> None:
    assert code_of(audio(mime=mime)) == "wrong-mime"


@pytest.mark.parametrize(
    "text",
    [
        GOOD[:100] + "\n" + GOOD[100:],
        " " + GOOD,
        GOOD + "\r\n",
        GOOD.replace("+", "-").replace("/", "_") if ("+" in GOOD or "/" in GOOD) else GOOD + "-",
        "data:audio/wav;base64," + GOOD,
        GOOD.rstrip("=") if GOOD.endswith("=") else GOOD + "A",
        GOOD[:-4] + "AB=",
        GOOD + "====",
        "QR==",
        "QUI=" + GOOD,
        "QUJ=",
        GOOD[:8] + "é" + GOOD[9:],
        GOOD[:8] + "\0" + GOOD[9:],
        "=",
    ],
)
def test_bad_base64(text: str) -> None:
    assert code_of(audio(text)) == "bad-base64"


def test_empty_base64_is_no_wav() -> None:
    assert code_of(audio("")) == "not-riff"


def test_oversized_text_is_refused_before_decoding() -> None:
    # Not base64 at all: refused as too large, which shows the length came first.
    too_long = "*" * (max_base64_length() + 1)
    assert code_of(audio(too_long)) == "too-large"
    assert code_of(audio("*" * max_base64_length())) == "bad-base64"


def test_size_bound_follows_the_caller_limit() -> None:
    four_seconds = wav_base64(np.zeros(16000 * 4))
    assert clip_from_skill_input(audio(four_seconds), max_seconds=4).frames == 64000
    assert code_of(audio(four_seconds), max_seconds=3.9) == "too-long"
    assert code_of(audio(four_seconds), max_seconds=0.5) == "too-large"


def test_the_longest_clip_fits_the_bound() -> None:
    text = wav_base64(np.zeros(16000 * 15))
    assert len(text) <= max_base64_length()
    assert clip_from_skill_input(audio(text)).frames == 16000 * 15


@pytest.mark.parametrize("data", [b"", b"\0", b"ab", b"abc", bytes(range(256))])
def test_strict_decoding_agrees_with_the_standard_encoder(data: bytes) -> None:
    assert decode_strict(base64.b64encode(data).decode()) == data
