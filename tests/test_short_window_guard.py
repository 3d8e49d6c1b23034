"""The short encoder window and its guard: an answer that looks degenerate on the short
window is decoded again on the whole 30 s window, and the answer says which window gave it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from byoa_skills.models import model_path
from byoa_skills.runtimes.speech import DecodeOptions, SpeechBackend, load_backend
from byoa_skills.runtimes.speech.base import Transcript
from byoa_skills.runtimes.speech.whisper_ct2 import compression_ratio, looks_degenerate
from byoa_skills.wav import parse_wav

SPEECH = Path(__file__).parent / "data" / "speech"


def clip(file: str) -> np.ndarray:
    return parse_wav((SPEECH / file).read_bytes()).to_float32()


@pytest.fixture(scope="module")
def short_window(engine_home: Path) -> Iterator[SpeechBackend]:
    """``base`` encoding 15 s of each window, as ``--encoder-seconds 15`` runs it."""
    folder = model_path("base", cache_dir=engine_home / "cache" / "models")
    yield load_backend(folder, model_name="base", cpu_threads=2,
                       options=DecodeOptions(encoder_seconds=15.0))  # fmt: skip


def heard(text: str, **how: object) -> Transcript:
    how = {"avg_logprob": -0.3, **how}
    return Transcript(text=text, language="en", language_probability=1.0, seconds=0.1,
                      **how)  # type: ignore[arg-type]  # fmt: skip


def test_what_counts_as_degenerate() -> None:
    options = DecodeOptions(encoder_seconds=15.0)
    assert not looks_degenerate(heard("And so my fellow Americans, ask not."), options)
    assert not looks_degenerate(heard(""), options)
    assert looks_degenerate(heard("five " * 60), options)
    assert compression_ratio("five " * 60) > 2.4 > compression_ratio("Hello world.")
    assert looks_degenerate(heard("a sentence cut off", budget_hit=True), options)
    assert looks_degenerate(heard("mumbled", avg_logprob=-1.4), options)
    no_ratio = DecodeOptions(compression_ratio_threshold=None, encoder_seconds=15.0)
    assert not looks_degenerate(heard("five " * 60), no_ratio)


def test_a_clip_that_fits_the_short_window_is_answered_from_it(
    short_window: SpeechBackend,
) -> None:
    answer = short_window.transcribe(clip("jfk.wav"), "en")
    assert answer.window_seconds == 15.0
    assert "fellow americans" in answer.text.lower()
    assert not looks_degenerate(answer, short_window.options)


def test_a_clip_built_to_loop_is_decoded_again_on_the_whole_window(
    short_window: SpeechBackend,
) -> None:
    # one word said eleven times over 12 s: the text repeats itself, as a looping decode does
    hello = clip("en-hello.wav")
    pause = np.zeros(1600, dtype=np.float32)
    looping = np.concatenate([np.concatenate([hello, pause])] * 11)
    assert looping.size / 16_000 < 15
    answer = short_window.transcribe(looping, "en")
    assert answer.window_seconds == 30.0 and answer.text


def test_a_clip_longer_than_the_short_window_uses_the_whole_one(
    short_window: SpeechBackend,
) -> None:
    long = np.concatenate([clip("en-long.wav"), clip("en-fox.wav")])
    answer = short_window.transcribe(long, "en")
    assert answer.window_seconds == 30.0 and "fox" in answer.text.lower()
