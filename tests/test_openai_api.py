"""The OpenAI-compatible API, spoken to with the real ``openai`` SDK against the real ``serve``:
each response format, word timestamps, streaming, a translation, other formats, a long
recording across the pool, the error shape, and Activity's entry for the visitor's own calls."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
from engine import TOKEN, Engine
from speech import SPEECH, word_recall, words

from byoa_skills.bench.scenarios.longform import build_recording, word_error_rate
from byoa_skills.models import model_path
from byoa_skills.wav import parse_wav, wav_from_int16

JFK = SPEECH / "jfk.wav"
SAID = "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country."  # noqa: E501


def client(engine: Engine, key: str = TOKEN) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{engine.url}/v1", api_key=key, max_retries=0, timeout=600)


def transcribe(engine: Engine, file: Any, **options: Any) -> Any:
    return client(engine).audio.transcriptions.create(model="whisper-1", file=file, **options)


def test_each_response_format(engine: Engine) -> None:
    plain = transcribe(engine, JFK.open("rb"))
    assert word_recall(SAID, plain.text) >= 0.9
    assert plain.usage.seconds == pytest.approx(11.0)
    text = transcribe(engine, JFK.open("rb"), response_format="text")
    assert words(text) == words(plain.text)
    verbose = transcribe(engine, JFK.open("rb"), response_format="verbose_json", language="en")
    assert verbose.language == "en" and verbose.duration == pytest.approx(11.0)
    assert verbose.segments and 0 <= verbose.segments[0].start < verbose.segments[-1].end <= 11.1
    assert word_recall(SAID, verbose.text) >= 0.9
    subtitles = transcribe(engine, JFK.open("rb"), response_format="srt")
    assert subtitles.startswith("1\n00:00:00,") and " --> 00:00:1" in subtitles
    cues = transcribe(engine, JFK.open("rb"), response_format="vtt")
    assert cues.startswith("WEBVTT\n\n00:00:0")


def test_word_timestamps_are_in_order_within_the_clip(engine: Engine) -> None:
    answer = transcribe(
        engine,
        JFK.open("rb"),
        response_format="verbose_json",
        timestamp_granularities=["word", "segment"],
    )
    assert answer.words and answer.segments
    assert word_recall(SAID, " ".join(w.word for w in answer.words)) >= 0.9
    starts = [w.start for w in answer.words]
    assert starts == sorted(starts) and all(w.start <= w.end <= 11.1 for w in answer.words)
    country = [w for w in answer.words if "country" in w.word.lower()]
    assert len(country) == 2 and country[0].start > 3.0  # said late in the clip


def test_streamed_deltas_join_into_the_whole_answer(engine: Engine) -> None:
    samples, _ = build_recording(70, SPEECH)
    wav = wav_from_int16(samples)
    whole = transcribe(engine, ("long.wav", wav), language="en").text
    events = list(transcribe(engine, ("long.wav", wav), language="en", stream=True))
    deltas = [e.delta for e in events if e.type == "transcript.text.delta"]
    assert len(deltas) >= 3  # one per piece with speech
    assert [e.type for e in events][-1] == "transcript.text.done"
    assert "".join(deltas) == events[-1].text == whole


def test_a_translation_is_english(engine: Engine) -> None:
    answer = client(engine).audio.translations.create(
        model="whisper-1", file=(SPEECH / "ru-thanks.wav").open("rb")
    )
    assert answer.text.strip() and answer.text.isascii()


def test_a_translation_is_counted_under_the_skill_activity_names(engine: Engine) -> None:
    before = len(engine.activity())
    counted = {
        skill: engine.metric("byoa_calls_total", skill=skill, outcome="ok")
        for skill in ("audio.transcribe", "audio.translate")
    }
    audio = engine.metric("byoa_audio_seconds_total")
    client(engine).audio.translations.create(
        model="whisper-1", file=(SPEECH / "ru-thanks.wav").open("rb")
    )
    rows = [json.loads(row) for row in engine.activity_once(lambda rows: len(rows) > before)]
    local = [entry for entry in rows[before:] if entry.get("kind") == "local"]
    assert local and local[-1]["outcome"] == "ok"
    skill = local[-1]["skill"]
    assert engine.metric("byoa_calls_total", skill=skill, outcome="ok") == counted[skill] + 1
    assert (skill, local[-1]["task"]) == ("audio.transcribe", "translate")
    assert engine.metric("byoa_audio_seconds_total") == pytest.approx(
        audio + local[-1]["clipSeconds"], abs=0.01
    )


@pytest.mark.parametrize("kind", ["flac", "ogg", "mp3", "wav-48k-stereo"])
def test_other_formats_give_the_same_words(engine: Engine, kind: str, tmp_path: Path) -> None:
    from test_recordings import pyav_encoded

    if kind == "mp3":
        data = pyav_encoded(parse_wav(JFK.read_bytes()).samples, "libmp3lame", "mp3")
    else:
        target = tmp_path / ("a.wav" if kind.startswith("wav") else f"a.{kind}")
        effects = ["-r", "48000", "-c", "2"] if kind.startswith("wav") else []
        subprocess.run(["sox", str(JFK), *effects, str(target)], check=True)
        data = target.read_bytes()
    reference = transcribe(engine, JFK.open("rb"), language="en").text
    heard = transcribe(engine, (f"a.{kind}", data), language="en").text
    assert word_error_rate(reference, heard) <= 0.1, (reference, heard)


def test_refusals_are_in_openai_shape(engine: Engine) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        transcribe(engine, ("notes.mp3", b"not audio at all " * 200))
    assert bad.value.body["code"] == "audio-undecodable"
    assert bad.value.body["type"] == "invalid_request_error" and bad.value.body["message"]
    with pytest.raises(openai.AuthenticationError) as wrong:
        client(engine, "not-the-token").audio.transcriptions.create(
            model="whisper-1", file=JFK.open("rb")
        )
    assert wrong.value.body["code"] == "unauthorized"
    with pytest.raises(openai.APIStatusError) as large:
        transcribe(engine, ("big.wav", b"\0" * (25 * 1024 * 1024 + 1)))
    assert large.value.status_code == 413 and large.value.body["code"] == "file-too-large"
    with pytest.raises(openai.NotFoundError) as unknown:
        client(engine).audio.transcriptions.create(model="gpt-4o-transcribe", file=JFK.open("rb"))
    assert unknown.value.body["code"] == "unknown-model"
    with pytest.raises(openai.BadRequestError) as needs_verbose:
        transcribe(engine, JFK.open("rb"), timestamp_granularities=["word"])
    assert needs_verbose.value.body["code"] == "bad-params"


def test_models_lists_the_speech_model(engine: Engine) -> None:
    ids = [model.id for model in client(engine).models.list()]
    assert ids[:2] == ["whisper-1", "base"]


def test_activity_lists_the_local_clients_calls_without_content(engine: Engine) -> None:
    before = len(engine.activity())
    transcribe(engine, JFK.open("rb"), language="en")
    rows = [json.loads(row) for row in engine.activity_once(lambda rows: len(rows) > before)]
    local = [entry for entry in rows[before:] if entry.get("kind") == "local"]
    assert local and local[-1]["skill"] == "audio.transcribe" and local[-1]["outcome"] == "ok"
    assert local[-1]["clipSeconds"] == pytest.approx(11.0) and "origin" not in local[-1]
    assert "fellow" not in json.dumps(rows).lower() and "grant" not in local[-1]


@pytest.mark.slow
def test_a_long_recording_across_the_pool_hears_what_faster_whisper_hears(
    engine: Engine, engine_home: Path
) -> None:
    """Against faster-whisper's own way of decoding a long recording in VAD pieces (its batched
    pipeline, one temperature, so the same words every run); its ``transcribe`` falls back to
    sampling at higher temperatures and hears this recording differently from run to run
    (docs/openai.md), so it cannot be a yardstick."""
    samples, said = build_recording(180, SPEECH)
    heard = transcribe(engine, ("long.wav", wav_from_int16(samples)), language="en").text
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    folder = model_path("base", cache_dir=engine_home / "cache" / "models")
    model = WhisperModel(str(folder), compute_type="int8", cpu_threads=2)
    pipeline = BatchedInferencePipeline(model)
    segments, _ = pipeline.transcribe(samples.astype(np.float32) / 32768, language="en")
    reference = " ".join(segment.text.strip() for segment in segments)  # its own defaults
    ours, theirs = word_error_rate(said, heard), word_error_rate(said, reference)
    between = word_error_rate(reference, heard)
    print(
        f"WER against what was said: engine {ours:.1%}, faster-whisper batched {theirs:.1%}; "
        f"engine against faster-whisper {between:.1%}"
    )
    assert ours <= theirs + 0.05 and between <= 0.15


def test_a_prompt_longer_than_the_decoder_takes_keeps_its_last_tokens(engine: Engine) -> None:
    prompt = "A speech by John F. Kennedy, read in Washington in January. " * 40
    assert len(prompt) > 2000
    answer = transcribe(engine, JFK.open("rb"), language="en", prompt=prompt)
    assert word_recall(SAID, answer.text) >= 0.9
    verbose = transcribe(engine, JFK.open("rb"), prompt=prompt, response_format="verbose_json")
    assert verbose.segments and word_recall(SAID, verbose.text) >= 0.9


def test_the_prompt_is_cut_to_the_budget_the_context_leaves(engine_home: Path) -> None:
    from faster_whisper import WhisperModel

    from byoa_skills.runtimes.speech.whisper_ct2 import prompt_budget, prompt_tokens

    assert prompt_budget(multilingual=True, max_new_tokens=224) == 219
    assert prompt_budget(multilingual=False, max_new_tokens=224) == 221
    assert prompt_budget(multilingual=True, max_new_tokens=100) == 223  # Whisper's own half
    folder = model_path("tiny.en", cache_dir=engine_home / "cache" / "models")
    model = WhisperModel(str(folder), compute_type="int8", cpu_threads=1)
    prompt = " ".join(f"word{n}" for n in range(400))
    every = model.hf_tokenizer.encode(" " + prompt, add_special_tokens=False).ids
    kept = prompt_tokens(model, prompt, 224)
    assert len(every) > 400 and kept == every[-221:]
    assert model.hf_tokenizer.decode(kept).strip().endswith("word399")
    assert (
        prompt_tokens(model, "short", 224)
        == model.hf_tokenizer.encode(" short", add_special_tokens=False).ids
    )
