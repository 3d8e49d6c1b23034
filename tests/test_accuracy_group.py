"""The real-speech set's two parts, the microphone variants of its short clips, the doubled-
answer check, and one small run of the ``accuracy`` group on the real ``base`` model."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from byoa_skills.bench.clips import PARTS, REAL_DIR, real_records
from byoa_skills.bench.micvariants import (
    MAX_SECONDS,
    RECIPES,
    SAMPLE_RATE,
    make_variant,
    mic_variants,
    round_trip_48k,
)
from byoa_skills.bench.scenarios import accuracy
from byoa_skills.bench.words import doubled
from byoa_skills.runtimes.speech.phrases import normalized_words, repeated_phrases

LANGUAGES = {"en", "es", "fr", "it", "ru"}


def _flac(file: str) -> np.ndarray:
    import soundfile

    samples, rate = soundfile.read(REAL_DIR / file, dtype="int16")
    assert rate == SAMPLE_RATE and samples.ndim == 1
    return np.ascontiguousarray(samples)


# --- the split ------------------------------------------------------------------------------


def test_every_clip_is_in_exactly_one_part_and_the_parts_hold_every_clip() -> None:
    records = real_records()
    assert {r["part"] for r in records} == set(PARTS)
    tune, held = real_records("tune"), real_records("held-out")
    files = [r["file"] for r in records]
    assert len(files) == len(set(files))
    assert sorted(files) == sorted(r["file"] for r in tune + held)
    assert not {r["file"] for r in tune} & {r["file"] for r in held}
    on_disk = {p.name for p in REAL_DIR.glob("*.flac")} - {"longform-en.flac"}
    assert set(files) <= on_disk
    with pytest.raises(ValueError):
        real_records("train")


def test_both_parts_hold_every_language_sentences_and_short_answers_in_balance() -> None:
    count = Counter((r["part"], r["language"], r["short"]) for r in real_records())
    for language in LANGUAGES:
        for short in (False, True):
            tune, held = count["tune", language, short], count["held-out", language, short]
            assert tune >= 1 and held >= 1, (language, short)
            assert abs(tune - held) <= 1, (language, short)
        assert count["tune", language, True] >= 4  # short answers: at least 8 per language
    for part in PARTS:  # neither part takes the short end of the lengths
        seconds = [r["seconds"] for r in real_records(part) if not r["short"]]
        others = [r["seconds"] for r in real_records() if not r["short"]]
        assert abs(np.median(seconds) - np.median(others)) < 1.0


def test_the_split_follows_the_written_rule() -> None:
    # per language and kind, by length then file name: tune, held-out, held-out, tune, ...
    groups: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    for record in real_records():
        groups.setdefault((record["language"], record["short"]), []).append(record)
    order = ("tune", "held-out", "held-out", "tune")
    for group in groups.values():
        group.sort(key=lambda r: (r["seconds"], r["file"]))
        assert [r["part"] for r in group] == [order[i % 4] for i in range(len(group))]


def test_short_answers_are_one_to_three_words_of_real_speech_under_two_seconds() -> None:
    short = [r for r in real_records() if r["short"]]
    assert {r["language"] for r in short} == LANGUAGES
    for record in short:
        assert 1 <= len(normalized_words(record["text"])) <= 3, record
        assert 0.4 <= record["seconds"] <= 2.0, record
        assert record["source"].startswith("asterisk-core-sounds-") and record["licence"]
        seconds = len(_flac(record["file"])) / SAMPLE_RATE
        assert seconds == pytest.approx(record["seconds"], abs=1e-3)
        if "also" in record:  # a number, also written in figures
            assert re.fullmatch(r"\d+", record["also"][0]) and "-digits-" in record["file"]


def test_the_readme_counts_the_set_as_it_is() -> None:
    readme = (REAL_DIR / "README.md").read_text(encoding="utf-8")
    records = real_records()
    shorts = sum(r["short"] for r in records)
    assert f"{len(records)} clips of real human speech" in readme
    assert f"{len(records) - shorts} sentences" in readme and f"{shorts} short answers" in readme
    for part in PARTS:
        mine = real_records(part)
        seconds = sum(r["seconds"] for r in mine)
        assert f"| {part} | {len(mine)} | {seconds:.1f} |" in readme


# --- the microphone variants ----------------------------------------------------------------


def test_each_short_clip_gets_the_same_valid_variants_every_time() -> None:
    record = next(r for r in real_records("held-out") if r["short"])
    samples = _flac(record["file"])
    first = mic_variants(samples, record["file"])
    again = mic_variants(samples.copy(), record["file"])
    assert 10 <= len(first) == len(RECIPES) <= 12
    assert [v.name for v in first] == [r.name for r in RECIPES]
    for variant, recipe, twin in zip(first, RECIPES, again, strict=True):
        assert variant.samples.dtype == np.int16 and variant.samples.ndim == 1
        assert np.array_equal(variant.samples, twin.samples)
        assert variant.seconds <= MAX_SECONDS
        assert recipe.lead_s[0] <= variant.lead_s <= recipe.lead_s[1] + 1 / SAMPLE_RATE
        assert recipe.trail_s[0] <= variant.trail_s <= recipe.trail_s[1] + 1 / SAMPLE_RATE
        expected = round(variant.lead_s * SAMPLE_RATE) + len(samples)
        expected += round(variant.trail_s * SAMPLE_RATE)
        assert len(variant.samples) == expected
    leads = [v.lead_s for v in first]
    assert min(leads) < 0.3 and max(leads) > 0.6
    assert max(v.trail_s for v in first) > 2.0
    other = next(r for r in real_records("tune") if r["short"])
    noisy = next(r for r in RECIPES if r.noise_db is not None)
    a = make_variant(samples, record["file"], noisy)
    b = make_variant(samples, other["file"], noisy)
    assert a.lead_s != b.lead_s  # each clip draws its own silences and noise


def test_the_levels_are_quiet_loud_and_a_little_noisy() -> None:
    record = next(r for r in real_records("tune") if r["short"])
    samples = _flac(record["file"])
    peak = int(np.abs(samples.astype(np.int32)).max())
    by_name = {v.name: v for v in mic_variants(samples, record["file"])}
    quiet = int(np.abs(by_name["quiet"].samples.astype(np.int32)).max())
    assert quiet == pytest.approx(peak / 10, rel=0.01)  # -20 dB
    loud = np.abs(by_name["loud"].samples.astype(np.int32))
    assert loud.max() >= 32767
    assert 0 < (loud >= 32767).mean() < 0.01  # a little clipping, no more
    lead = round(by_name["noise"].lead_s * SAMPLE_RATE)
    silence = by_name["noise"].samples[:lead].astype(np.float64) / 32768
    assert 0 < np.sqrt(np.mean(silence**2)) < 0.01  # noise in the silence, well below speech


def test_the_48k_round_trip_keeps_speech_frequencies_and_the_length() -> None:
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    for hz in (200.0, 1000.0, 3000.0, 6000.0):
        tone = 0.5 * np.sin(2 * np.pi * hz * t)
        back = round_trip_48k(tone)
        assert len(back) == len(tone)
        middle = slice(1000, -1000)
        assert np.max(np.abs(back[middle] - tone[middle])) < 0.01, hz
    nyquist = 0.5 * np.sin(2 * np.pi * 7950.0 * t)
    assert np.max(np.abs(round_trip_48k(nyquist)[1000:-1000])) < 0.05  # filtered away


# --- doubled answers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "answer", "expected"),
    [
        ("Mexico", "Mexico Mexico", True),
        ("Mexico", "Mexico.", False),
        ("ten of clubs", "10 of clubs 10 of clubs", True),
        ("Seven of clubs", "Seven of clubs. Seven of clubs.", True),
        ("Norway", "Nor away Nor away", True),
        ("Ха", "Ха-ха-ха", True),  # noqa: RUF001
        ("ha ha", "Ha, ha!", False),
        ("ha ha", "ha ha ha", True),
        ("Seven.", "7 7", True),
        ("Seven.", "7.", False),
        ("eight of spades four of clubs", "8 of spades, 4 of clubs", False),
        ("Hello world.", "Hello, World!", False),
        ("", "", False),
        ("Goodbye!", "", False),
    ],
)
def test_a_phrase_said_twice_where_the_reference_says_it_once_is_doubled(
    reference: str, answer: str, expected: bool
) -> None:
    assert doubled(reference, answer) is expected


def test_repeats_lists_each_back_to_back_phrase_once_shortest_first() -> None:
    assert repeated_phrases(["a", "b", "a", "b", "b"]) == [("b",), ("a", "b")]
    assert repeated_phrases(["one"]) == [] and repeated_phrases([]) == []


WORDS = st.lists(st.sampled_from(["seven", "of", "clubs", "norway", "да", "nein"]), max_size=8)


@given(WORDS)
def test_an_answer_that_is_its_reference_is_never_doubled(words: list[str]) -> None:
    text = " ".join(words)
    assert not doubled(text, text)
    assert not doubled(text, text.upper() + ".")


@given(WORDS.filter(bool))
def test_an_answer_that_says_its_reference_twice_is_doubled(words: list[str]) -> None:
    text = " ".join(words)
    assert doubled(text, f"{text}, {text}")


@given(WORDS, WORDS)
def test_doubled_depends_on_the_words_only(reference: list[str], answer: list[str]) -> None:
    plain = doubled(" ".join(reference), " ".join(answer))
    assert doubled("-".join(reference).title(), ", ".join(answer).upper() + "!") is plain


# --- the group ------------------------------------------------------------------------------


def test_the_plan_judges_each_part_clean_and_as_variants_and_quick_is_small() -> None:
    records = real_records()
    calls = accuracy.plan(records)
    kinds = Counter((c.part, c.kind) for c in calls)
    for part in PARTS:
        mine = real_records(part)
        assert kinds[part, "sentences"] == sum(not r["short"] for r in mine)
        assert kinds[part, "short"] == sum(r["short"] for r in mine)
        small = sum(r["seconds"] <= accuracy.MIC_UP_TO_SECONDS for r in mine)
        assert kinds[part, "mic"] == small * len(RECIPES)
    assert [c.part for c in calls].index("tune") > max(
        i for i, c in enumerate(calls) if c.part == "held-out"
    )  # held-out first
    quick = accuracy.plan(records, quick=True)
    assert {c.part for c in quick} == {"held-out"} and {c.kind for c in quick} == {"mic"}
    assert sorted(c.language for c in quick) == sorted(LANGUAGES)
    assert accuracy.plan(records, quick=True) == quick


def test_a_number_is_right_in_words_or_in_figures() -> None:
    record = next(r for r in real_records() if r["file"] == "en-ast-digits-7.flac")
    call = accuracy.Call(record["part"], "short", record)
    assert accuracy.judge(call, "Seven.") == (0, 1, False)
    assert accuracy.judge(call, "7.") == (0, 1, False)
    assert accuracy.judge(call, "7 7") == (1, 1, True)
    assert accuracy.judge(call, "Heaven") == (1, 1, False)


@pytest.mark.slow
def test_a_small_run_on_base_gives_both_ways_per_part_kind_and_language(
    engine_home: Path,
) -> None:
    from byoa_skills.models.cache import model_path
    from byoa_skills.pool.config import DEFAULT_ENCODER_SECONDS, engine_decode_options
    from byoa_skills.runtimes.speech import DecodeOptions, load_backend

    records = []
    for part in PARTS:  # one short answer in English and one in Russian, per part
        for language in ("en", "ru"):
            mine = [r for r in real_records(part) if r["short"] and r["language"] == language]
            records.append(mine[0])
    calls = accuracy.plan(records, recipes=RECIPES[:1])
    assert len(calls) == 8
    folder = model_path("base", cache_dir=engine_home / "cache" / "models")
    ways = {"whole": DecodeOptions(), "engine": engine_decode_options(DEFAULT_ENCODER_SECONDS)}
    decoded: dict[DecodeOptions, list] = {}  # the default decode is the whole window: once
    for options in ways.values():
        if options not in decoded:
            backend = load_backend(folder, model_name="base", cpu_threads=1, options=options)
            decoded[options] = accuracy.decode_all(backend, calls)
    by_way = {way: decoded[options] for way, options in ways.items()}
    figures = accuracy.summarize(by_way)
    assert figures["part"] == "held-out" and list(figures["parts"]) == ["held-out", "tune"]
    assert figures["ways"] is figures["parts"]["held-out"]["all"]["ways"]
    for part in PARTS:
        groups = figures["parts"][part]
        assert list(groups) == ["short", "mic", "all"]
        calls = [groups[kind]["calls"] for kind in ("short", "mic", "all")]
        assert calls == [2, 2, 4]
        for group in groups.values():
            assert set(group["ways"]) == {"whole", "engine"}
            for way in group["ways"].values():
                assert set(way["wer"]) == set(way["doubled"]) == {"en", "ru"}
                assert all(0 <= wer <= 3 for wer in way["wer"].values())
                assert way["doubled_all"] == sum(way["doubled"].values()) <= way["calls"]
                assert len(way["doubled_examples"]) == min(way["doubled_all"], accuracy.EXAMPLES)
                assert sum(way["answered_by"].values()) == way["calls"]
                assert 0 <= way["decoded_again_rate"] <= 1 and way["seconds"] > 0
    whole = figures["ways"]["whole"]
    assert set(whole["answered_by"]) == {"30 s, beam 5"}
    assert set(figures["engine_minus_whole"]) == set(figures["doubled_engine_minus_whole"])
    assert isinstance(figures["within_goal"], bool)


@pytest.mark.slow
def test_the_quick_group_judges_one_variant_per_language_of_the_held_out_part(
    engine_home: Path, tmp_path: Path
) -> None:
    from byoa_skills.bench.context import Context, settings_for
    from byoa_skills.models.cache import model_path
    from byoa_skills.pool.config import DEFAULT_ENCODER_SECONDS, engine_decode_options
    from byoa_skills.runtimes.speech import DecodeOptions

    folder = model_path("base", cache_dir=engine_home / "cache" / "models")
    ctx = Context(settings_for(True, "base", "cpu"), {}, "", tmp_path, folder, 1)
    figures = accuracy.run(ctx)
    assert figures["parts_judged"] == ["held-out"] and figures["variants"] == ["mic"]
    assert figures["calls"] == len(LANGUAGES) and figures["clips"] == len(LANGUAGES)
    same = engine_decode_options(DEFAULT_ENCODER_SECONDS, "base") == DecodeOptions()
    assert figures["engine_is_whole_window"] is same
    for way in figures["ways"].values():
        assert set(way["wer"]) == set(way["doubled"]) == LANGUAGES
    assert set(figures["ways"]["whole"]["answered_by"]) == {"30 s, beam 5"}
