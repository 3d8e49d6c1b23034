"""The Whisper backend on real speech: real models, real inference, no mocks.

The models come from the session's verified model cache (tests/conftest.py). Accuracy
checks compare words after normalising case and punctuation, and allow small misspellings;
the thresholds are what ``base`` achieves on these clips with margin.
"""

from __future__ import annotations

import difflib
import json
import re
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from fresh_import import modules_after_import
from speech import faster_whisper_text, samples

from byoa_skills.models import model_path
from byoa_skills.runtimes.speech import (
    CODES,
    DecodeOptions,
    RuntimeRefusal,
    SpeechBackend,
    WhisperCT2Backend,
    load_backend,
)

#: The backends here encode with ``auto``'s encoder: run again with each one forced.
pytestmark = pytest.mark.encoder

SPEECH = Path(__file__).parent / "data" / "speech"
CLIPS = {c["file"]: c for c in json.loads((SPEECH / "clips.json").read_text(encoding="utf-8"))}
THREADS = 2


@pytest.fixture(scope="session")
def whisper_model_dir(engine_home: Path) -> Callable[[str], Path]:
    """``whisper_model_dir(name)``: the verified folder of model ``name`` in the test cache."""
    return lambda name: model_path(name, cache_dir=engine_home / "cache" / "models")


@pytest.fixture(scope="session")
def base(whisper_model_dir: Callable[[str], Path]) -> Iterator[SpeechBackend]:
    yield load_backend(whisper_model_dir("base"), model_name="base", cpu_threads=THREADS)


@pytest.fixture(scope="session")
def tiny_en(whisper_model_dir: Callable[[str], Path]) -> Iterator[SpeechBackend]:
    yield load_backend(whisper_model_dir("tiny.en"), model_name="tiny.en", cpu_threads=THREADS)


def words(text: str) -> list[str]:
    """Lower-case words, punctuation removed."""
    text = unicodedata.normalize("NFC", text).lower()
    return re.sub(r"[^\w\s']|_", " ", text).replace("'", "").split()


def found(expected: list[str], text: str) -> list[str]:
    """The expected words that occur in ``text``, allowing a small misspelling."""
    heard = words(text)
    return [
        w
        for w in expected
        if any(difflib.SequenceMatcher(None, w, h).ratio() >= 0.8 for h in heard)
    ]


def overlap(expected_text: str, text: str) -> float:
    """The share of the expected words that occur in ``text``."""
    expected = words(expected_text)
    return len(found(expected, text)) / len(expected)


# --- English ------------------------------------------------------------------------------


@pytest.mark.parametrize("file", ["en-hello.wav", "en-fox.wav", "en-long.wav", "jfk.wav"])
def test_english_speech_is_transcribed(base: SpeechBackend, file: str) -> None:
    transcript = base.transcribe(samples(file), "en")
    assert overlap(CLIPS[file]["text"], transcript.text) >= 0.8, transcript.text
    assert transcript.language == "en"
    assert transcript.language_probability == 1.0


def test_jfk_key_words(base: SpeechBackend) -> None:
    text = base.transcribe(samples("jfk.wav"), "en").text
    key = ["fellow", "americans", "ask", "not", "what", "your", "country", "can", "do"]
    assert found(key, text) == key, text


def test_tiny_en_transcribes_english(tiny_en: SpeechBackend) -> None:
    transcript = tiny_en.transcribe(samples("jfk.wav"), None)
    assert overlap(CLIPS["jfk.wav"]["text"], transcript.text) >= 0.8, transcript.text
    assert transcript.language == "en"


# --- Russian and Slovak (espeak-ng voices, which base finds hard) --------------------------

# file -> (words that must be heard, least share of all the words heard)
OTHER_LANGUAGES = {
    "ru-thanks.wav": (["спасибо", "большое", "до", "свидания"], 1.0),
    "ru-weather.wav": (["сегодня", "хорошая", "погода"], 0.4),
    "sk-thanks.wav": (["ďakujem", "pekne"], 0.5),
    "sk-weather.wav": (["pekné", "počasie", "ideme"], 0.5),
}


@pytest.mark.parametrize("file", sorted(OTHER_LANGUAGES))
def test_russian_and_slovak_with_language_given(base: SpeechBackend, file: str) -> None:
    key, least = OTHER_LANGUAGES[file]
    language = CLIPS[file]["language"]
    transcript = base.transcribe(samples(file), language)
    assert transcript.language == language
    assert found(key, transcript.text) == key, transcript.text
    assert overlap(CLIPS[file]["text"], transcript.text) >= least, transcript.text


def test_russian_comes_out_in_cyrillic(base: SpeechBackend) -> None:
    text = base.transcribe(samples("ru-weather.wav"), "ru").text
    letters = [ch for ch in text if ch.isalpha()]
    assert letters
    assert all("CYRILLIC" in unicodedata.name(ch) for ch in letters), text


# --- Language detection -------------------------------------------------------------------


@pytest.mark.parametrize(("file", "language"), [("jfk.wav", "en"), ("ru-thanks.wav", "ru")])
def test_language_is_detected(base: SpeechBackend, file: str, language: str) -> None:
    transcript = base.transcribe(samples(file), None)
    assert transcript.language == language
    assert 0.0 < transcript.language_probability <= 1.0
    assert overlap(CLIPS[file]["text"], transcript.text) >= 0.8, transcript.text


# --- No speech ----------------------------------------------------------------------------


@pytest.mark.parametrize("file", ["silence-1s.wav", "noise-2s.wav"])
@pytest.mark.parametrize("language", [None, "en"])
def test_silence_and_noise_give_no_text(
    base: SpeechBackend, file: str, language: str | None
) -> None:
    transcript = base.transcribe(samples(file), language)
    assert transcript.text == ""
    assert transcript.language == language


def test_no_samples_give_no_text(base: SpeechBackend) -> None:
    assert base.transcribe(np.zeros(0, dtype=np.float32), None).text == ""


def test_noise_without_vad_gives_no_text(whisper_model_dir: Callable[[str], Path]) -> None:
    backend = WhisperCT2Backend(
        whisper_model_dir("tiny.en"), cpu_threads=THREADS, options=DecodeOptions(vad_filter=False)
    )
    backend.load()
    assert backend.transcribe(samples("silence-1s.wav"), "en").text == ""


# --- The hard case: one word ----------------------------------------------------------------


@pytest.mark.parametrize("file", sorted(f for f in CLIPS if f.startswith("country-")))
def test_single_country_names_get_an_answer(base: SpeechBackend, file: str) -> None:
    for language in ("en", None):
        transcript = base.transcribe(samples(file), language)
        assert isinstance(transcript.text, str)
        assert transcript.text == transcript.text.strip()


# --- Determinism and faithfulness to faster-whisper ----------------------------------------


def test_same_clip_gives_same_text(base: SpeechBackend) -> None:
    clip = samples("en-fox.wav")
    first, second = base.transcribe(clip, None), base.transcribe(clip.copy(), None)
    assert first.text == second.text
    assert first.language == second.language
    assert first.language_probability == second.language_probability


@pytest.fixture(scope="module")
def base_ct2(whisper_model_dir: Callable[[str], Path]) -> SpeechBackend:
    """``base`` with CTranslate2's own encoder, whatever ``auto`` picks on this CPU."""
    return load_backend(
        whisper_model_dir("base"), cpu_threads=THREADS, encoder_backend="ctranslate2"
    )


@pytest.mark.parametrize(("file", "language"), [("jfk.wav", "en"), ("ru-thanks.wav", "ru")])
def test_text_equals_faster_whisper_transcribe(
    base_ct2: SpeechBackend, whisper_model_dir: Callable[[str], Path], file: str, language: str
) -> None:
    """The shared encoder pass decodes exactly what faster-whisper's own transcribe() does
    with the same options, on the same encoder (CTranslate2's: faster-whisper has no other)."""
    expected = faster_whisper_text(whisper_model_dir("base"), samples(file), language, THREADS)
    assert base_ct2.transcribe(samples(file), language).text == expected


# --- Refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["ru", "sk", "xx"])
def test_tiny_en_refuses_other_languages(tiny_en: SpeechBackend, language: str) -> None:
    with pytest.raises(RuntimeRefusal) as refused:
        tiny_en.transcribe(samples("ru-thanks.wav"), language)
    assert refused.value.code == "unsupported-language"
    assert tiny_en.languages == frozenset({"en"})


@pytest.mark.parametrize("language", ["xx", "", "EN", "english"])
def test_base_refuses_unknown_language_codes(base: SpeechBackend, language: str) -> None:
    with pytest.raises(RuntimeRefusal) as refused:
        base.transcribe(samples("en-hello.wav"), language)
    assert refused.value.code == "unsupported-language"
    assert {"en", "ru", "sk"} <= base.languages


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros(16000, dtype=np.int16),
        np.zeros(16000, dtype=np.float64),
        np.zeros((2, 8000), dtype=np.float32),
        np.array([0.0, np.nan], dtype=np.float32),
        [0.0] * 16000,
    ],
    ids=["int16", "float64", "2-D", "nan", "list"],
)
def test_bad_samples_are_refused(base: SpeechBackend, bad: object) -> None:
    with pytest.raises(RuntimeRefusal) as refused:
        base.transcribe(bad, "en")  # type: ignore[arg-type]
    assert refused.value.code == "bad-samples"
    assert refused.value.code in CODES


def test_transcribe_before_load_is_an_error(whisper_model_dir: Callable[[str], Path]) -> None:
    backend = WhisperCT2Backend(whisper_model_dir("tiny.en"))
    assert not backend.loaded
    with pytest.raises(RuntimeError):
        backend.transcribe(samples("en-hello.wav"), "en")


def test_missing_model_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        WhisperCT2Backend(tmp_path).load()


# --- Options and imports ------------------------------------------------------------------


def test_decode_options_are_validated() -> None:
    assert DecodeOptions.TEMPERATURE == 0.0
    for bad in ({"beam_size": 0}, {"vad_threshold": 1.5}, {"max_new_tokens": 0}):
        with pytest.raises(ValueError):
            DecodeOptions(**bad)  # type: ignore[arg-type]


def test_importing_the_speech_runtime_leaves_the_engines_unimported() -> None:
    """The engines load in the worker that runs them, never on import."""
    heavy = ["torch", "transformers", "faster_whisper", "ctranslate2", "onnxruntime"]
    loaded = modules_after_import("byoa_skills.runtimes.speech")
    assert {"byoa_skills", "numpy"} <= loaded  # the probe really ran the import
    assert loaded.isdisjoint(heavy), loaded.intersection(heavy)
