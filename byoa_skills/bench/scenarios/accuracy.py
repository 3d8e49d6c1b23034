"""``accuracy``: the words the engine's decoding keeps, on the real speech of
tests/data/realspeech (language given), with the whole 30 s window and beam 5 (faster-whisper's
way) and with the engine's windows, guard and decode choices, in one run. Each part of the set
is judged on its own: **held-out** (speech no decoding choice is made on: the figures that
count) and **tune** (the speech the choices are made on, labelled as such). In each part: the
sentences and the short answers (one to three words) as recorded, and every clip of at most
2 s handed over as a browser microphone would (:mod:`byoa_skills.bench.micvariants`: silences
before and after, quiet or loud, a little noise, a 48 kHz round trip; 12 fixed variants each).
Per language: the word error rate, the answers that say a phrase twice where the reference
does not (:func:`byoa_skills.bench.words.doubled`), how often the guard decoded again, and the
seconds. In this process, one thread, one clip at a time; when the engine's default is the
whole window itself, its answers are the whole window's, decoded once."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from byoa_skills.bench.clips import PARTS, REAL_DIR, real_records
from byoa_skills.bench.context import Context, Skip
from byoa_skills.bench.micvariants import RECIPES, Recipe, make_variant
from byoa_skills.bench.scenarios.longform import word_errors
from byoa_skills.bench.words import doubled

NAME = "accuracy"
TITLE = "Words kept on real speech, per language"
#: The goal: the engine's WER within this of the whole window's, per language.
WITHIN = 0.005
#: Clips of at most this many seconds are also judged as microphone variants.
MIC_UP_TO_SECONDS = 2.0
#: The kinds of call judged in a part, in order: the sentences and the short answers as
#: recorded, and the microphone variants of the clips of at most :data:`MIC_UP_TO_SECONDS`.
KINDS = ("sentences", "short", "mic")
#: ``--quick``: the held-out part only, this many short answers per language (the first by
#: file name), each as these variants only (five calls a way with every language).
QUICK_SHORT_PER_LANGUAGE = 1
QUICK_RECIPES = ("mic",)
#: Doubled answers listed as examples, per way and part.
EXAMPLES = 8


@dataclass(frozen=True)
class Call:
    """One clip to decode: its part, kind, record (file, language, text, ``also``) and the
    microphone variant it is handed over as (None: as recorded)."""

    part: str
    kind: str
    record: dict[str, Any]
    recipe: Recipe | None = None

    @property
    def language(self) -> str:
        """The language spoken."""
        return str(self.record["language"])

    @property
    def label(self) -> str:
        """The clip's file, and its variant's name after a colon when it has one."""
        return self.record["file"] + (f":{self.recipe.name}" if self.recipe else "")

    def samples(self, folder: Path = REAL_DIR) -> np.ndarray:
        """The 16 kHz mono int16 samples handed to the engine (the variant made afresh: the
        same every time)."""
        import soundfile

        recorded, _ = soundfile.read(folder / self.record["file"], dtype="int16")
        recorded = np.ascontiguousarray(recorded)
        if self.recipe is None:
            return recorded
        return make_variant(recorded, self.record["file"], self.recipe).samples


def plan(
    records: list[dict[str, Any]],
    quick: bool = False,
    recipes: tuple[Recipe, ...] = RECIPES,
    parts: tuple[str, ...] = ("held-out", "tune"),
) -> list[Call]:
    """The calls of one run over ``records`` (each with ``part`` and ``short``), part by part
    in the order of ``parts``, then kind by kind (:data:`KINDS`), each in the records' order;
    the variants of one clip one after the other. ``quick``: the held-out part's first
    :data:`QUICK_SHORT_PER_LANGUAGE` short answers per language, as the variants of
    :data:`QUICK_RECIPES` only."""
    if quick:
        parts = ("held-out",)
        recipes = tuple(r for r in recipes if r.name in QUICK_RECIPES)
        taken: Counter[str] = Counter()
        chosen = []
        for record in sorted(records, key=lambda r: r["file"]):
            wanted = taken[record["language"]] < QUICK_SHORT_PER_LANGUAGE
            if record["part"] == "held-out" and record["short"] and wanted:
                taken[record["language"]] += 1
                chosen.append(record)
        records = chosen
    calls: list[Call] = []
    for part in parts:
        mine = [r for r in records if r["part"] == part]
        calls += [Call(part, "sentences", r) for r in mine if not r["short"]]
        calls += [Call(part, "short", r) for r in mine if r["short"]]
        calls += [
            Call(part, "mic", r, recipe)
            for r in mine
            if r["seconds"] <= MIC_UP_TO_SECONDS
            for recipe in recipes
        ]
    return [c for c in calls if c.kind == "mic"] if quick else calls


@dataclass(frozen=True)
class Heard:
    """What one call gave: the word errors against the nearest reference (the text, or one of
    its ``also`` spellings), the reference's words, whether the answer was doubled, whether
    the guard decoded it again, which window and beams answered, the answer, the seconds."""

    call: Call
    errors: int
    words: int
    doubled: bool
    again: bool
    answered_by: str
    text: str
    seconds: float


def judge(call: Call, text: str) -> tuple[int, int, bool]:
    """``(word errors, reference words, doubled)`` of the answer ``text`` to ``call``: the
    errors against whichever of the reference and its ``also`` spellings ("7" for "Seven.")
    is nearest, counted over that spelling's words."""
    references = [call.record["text"], *call.record.get("also", [])]
    errors, words = min(word_errors(reference, text) for reference in references)
    return errors, words, doubled(call.record["text"], text)


def decode_all(backend: Any, calls: list[Call], progress: Any = None) -> list[Heard]:
    """Every call decoded once by ``backend`` (a speech backend with ``transcribe``), in
    order; ``progress`` is called after each with no argument."""
    heard = []
    for call in calls:
        audio = call.samples().astype(np.float32) / 32768.0
        began = time.perf_counter()
        answer = backend.transcribe(audio, call.language)
        seconds = time.perf_counter() - began
        errors, words, twice = judge(call, answer.text)
        heard.append(
            Heard(
                call,
                errors,
                words,
                twice,
                answer.attempts > 1,
                f"{answer.window_seconds:g} s, beam {answer.beam_size}",
                answer.text,
                seconds,
            )
        )
        if progress is not None:
            progress()
    return heard


def tally(heard: list[Heard]) -> dict[str, Any]:
    """The figures of a set of answers: per language WER (errors over reference words) and
    doubled answers, the same over all languages, the guard's re-decodes, which windows and
    beams answered, the decoding seconds, and up to :data:`EXAMPLES` doubled answers."""
    errors: dict[str, int] = defaultdict(int)
    words: dict[str, int] = defaultdict(int)
    twice: dict[str, int] = defaultdict(int)
    calls: dict[str, int] = defaultdict(int)
    how: Counter[str] = Counter()
    for one in heard:
        language = one.call.language
        errors[language] += one.errors
        words[language] += one.words
        twice[language] += one.doubled
        calls[language] += 1
        how[one.answered_by] += 1
    again = sum(one.again for one in heard)
    languages = sorted(calls)
    return {
        "calls": len(heard),
        "calls_by_language": {n: calls[n] for n in languages},
        "wer": {n: errors[n] / max(1, words[n]) for n in languages},
        "wer_all": sum(errors.values()) / max(1, sum(words.values())),
        "errors": {n: errors[n] for n in languages},
        "words": {n: words[n] for n in languages},
        "doubled": {n: twice[n] for n in languages},
        "doubled_all": sum(twice.values()),
        "doubled_examples": [
            {"clip": one.call.label, "said": one.call.record["text"], "heard": one.text}
            for one in heard
            if one.doubled
        ][:EXAMPLES],
        "decoded_again": again,
        "decoded_again_rate": again / max(1, len(heard)),
        "answered_by": dict(sorted(how.items())),
        "seconds": sum(one.seconds for one in heard),
    }


def summarize(by_way: dict[str, list[Heard]]) -> dict[str, Any]:
    """The figures of a run from each way's answers (the same calls in each way): per part
    (held-out first) and kind, and the whole part (``all``), each way's :func:`tally`; at the
    top, ``ways``: the held-out part's ``all`` (or the one part judged), with the engine's
    WER minus the whole window's and its doubled answers minus the whole window's, per
    language, and whether both goals hold in every language (WER within :data:`WITHIN`, no
    more doubled answers)."""
    first = next(iter(by_way.values()))
    parts = [p for p in ("held-out", "tune") if any(h.call.part == p for h in first)]
    figures: dict[str, Any] = {"parts": {}}
    for part in parts:
        groups: dict[str, Any] = {}
        for kind in (*KINDS, "all"):
            calls = [h for h in first if h.call.part == part and kind in (h.call.kind, "all")]
            if not calls:
                continue
            groups[kind] = {
                "calls": len(calls),
                "clips": len({h.call.record["file"] for h in calls}),
                "ways": {
                    way: tally(
                        [h for h in heard if h.call.part == part and kind in (h.call.kind, "all")]
                    )
                    for way, heard in by_way.items()
                },
            }
        figures["parts"][part] = groups
    main = parts[0]
    top = figures["parts"][main]["all"]
    whole, engine = top["ways"]["whole"], top["ways"]["engine"]
    figures["part"] = main
    figures["clips"] = top["clips"]
    figures["calls"] = top["calls"]
    figures["ways"] = top["ways"]
    figures["engine_minus_whole"] = {n: engine["wer"][n] - whole["wer"][n] for n in whole["wer"]}
    figures["doubled_engine_minus_whole"] = {
        n: engine["doubled"][n] - whole["doubled"][n] for n in whole["doubled"]
    }
    figures["within_goal"] = all(
        d <= WITHIN for d in figures["engine_minus_whole"].values()
    ) and all(d <= 0 for d in figures["doubled_engine_minus_whole"].values())
    figures["goal"] = WITHIN
    return figures


def run(ctx: Context) -> dict[str, Any]:
    """Per part, kind and language, both ways: WER, doubled answers, the guard's re-decodes,
    the seconds; the held-out part's figures at the top."""
    if ctx.settings.device == "cuda":
        raise Skip("accuracy is judged on the CPU")
    if not (REAL_DIR / "clips.json").is_file():
        raise Skip("no real-speech set (tests/data/realspeech)")
    from byoa_skills.pool.config import DEFAULT_ENCODER_SECONDS, engine_decode_options
    from byoa_skills.runtimes.speech import DecodeOptions, load_backend

    engine = engine_decode_options(DEFAULT_ENCODER_SECONDS, ctx.settings.model)
    ways = {"whole": DecodeOptions(), "engine": engine}
    # decoding is deterministic: with the whole window as the engine's default, the engine's
    # answers are the whole window's, decoded once
    same = engine == ways["whole"]
    backends = {
        way: load_backend(
            ctx.model_dir, model_name=ctx.settings.model, cpu_threads=1, options=options
        )
        for way, options in ways.items()
        if not (same and way == "engine")
    }
    heard_by = set(backends["whole"].languages)
    records = [r for r in real_records() if r["language"] in heard_by]
    calls = plan(records, ctx.settings.quick)
    ctx.reporter.start(NAME, len(calls) * len(backends))
    by_way: dict[str, list[Heard]] = {}
    for way, backend in backends.items():
        ctx.reporter.step(f"{len(calls)} real clips and variants, {way}")
        if not ctx.settings.quick:  # the first call's set-up is not the decode's seconds
            backend.transcribe(calls[0].samples().astype(np.float32) / 32768.0, calls[0].language)
        by_way[way] = decode_all(backend, calls, ctx.reporter.advance)
    if same:
        by_way["engine"] = by_way["whole"]
    figures = summarize(by_way)
    figures["variants"] = [
        r.name for r in RECIPES if not ctx.settings.quick or r.name in QUICK_RECIPES
    ]
    figures["parts_judged"] = [p for p in PARTS if p in figures["parts"]]
    figures["engine_is_whole_window"] = same
    return figures
