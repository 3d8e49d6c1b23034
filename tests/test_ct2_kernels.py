"""CTranslate2's CPU kernels: the candidates for a CPU, the choice from measured figures (never
one that changes the words), the measurement kept and reused, the variables that force a
choice, and a worker that really decodes with the chosen kernels."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from poolkit import run_with_pool

from byoa_skills.models import model_path
from byoa_skills.pool import PoolConfig, WorkerPool
from byoa_skills.runtimes.speech import ct2_kernels
from byoa_skills.runtimes.speech.ct2_kernels import KernelChoice, Kernels, choose
from byoa_skills.runtimes.speech.derived import DERIVED_ENV
from byoa_skills.runtimes.speech.encoder_choice import cpu_flags
from byoa_skills.wav import parse_wav

SPEECH = Path(__file__).parent / "data" / "speech"
AVX512 = "fpu sse4_1 avx avx2 fma avx512f avx512bw avx512_vnni"
AVX2 = "fpu sse4_1 avx avx2 fma"
MKL_AVX2, ONEDNN_AVX2 = Kernels(True, "AVX2"), Kernels(False, "AVX2")


@pytest.fixture(scope="module")
def tiny(engine_home: Path) -> Path:
    """The tiny.en model's folder."""
    return model_path("tiny.en", cache_dir=engine_home / "cache" / "models")


@pytest.fixture
def no_ct2_variables(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No kernel variable of the user's or of ours is set."""
    for name in (*ct2_kernels.CT2_VARIABLES, ct2_kernels.KERNELS_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_candidates_follow_the_cpu() -> None:
    labels = [k.label for k in ct2_kernels.candidates(AVX512)]
    assert labels == ["mkl-avx2", "mkl-avx512", "onednn-avx2", "onednn-avx512"]
    assert [k.label for k in ct2_kernels.candidates(AVX2)] == ["mkl-avx2", "onednn-avx2"]
    assert ct2_kernels.candidates("fpu sse4_1 avx") == []
    assert ct2_kernels.candidates(None) == []
    assert ONEDNN_AVX2.environment == {"CT2_USE_MKL": "0", "CT2_FORCE_CPU_ISA": "AVX2"}


def test_the_fastest_with_the_same_words_is_chosen_past_the_margin() -> None:
    words, other = [[1, 2, 3]], [[1, 2, 4]]
    figures = {
        "mkl-avx2": {"decode_ms": 300.0, "tokens": words},
        "onednn-avx2": {"decode_ms": 450.0, "tokens": words},
    }
    own_slow = choose(ONEDNN_AVX2, [figures, figures])
    assert own_slow.kernels == MKL_AVX2 and "33% faster" in own_slow.reason
    assert own_slow.figures["onednn-avx2"]["ctranslate2_own"]
    assert own_slow.figures["mkl-avx2"]["rounds_ms"] == [300.0, 300.0]
    assert choose(MKL_AVX2, [figures]).kernels is None  # CTranslate2's own is the fastest
    figures["mkl-avx2"]["tokens"] = other  # faster, but other words: never chosen
    changed = choose(ONEDNN_AVX2, [figures])
    assert changed.kernels is None and not changed.figures["mkl-avx2"]["same_words"]
    figures["mkl-avx2"] = {"decode_ms": 440.0, "tokens": words}  # within the margin
    assert choose(ONEDNN_AVX2, [figures]).kernels is None


def test_a_gain_one_round_shows_and_another_does_not_changes_nothing() -> None:
    words = [[1, 2, 3]]
    busy = {  # CTranslate2's own was measured while another process took the core
        "mkl-avx2": {"decode_ms": 400.0, "tokens": words},
        "mkl-avx512": {"decode_ms": 300.0, "tokens": words},
    }
    idle = {
        "mkl-avx2": {"decode_ms": 290.0, "tokens": words},
        "mkl-avx512": {"decode_ms": 270.0, "tokens": words},
    }
    assert choose(MKL_AVX2, [busy]).kernels is not None  # one round alone is fooled
    held = choose(MKL_AVX2, [busy, idle])
    assert held.kernels is None and held.figures["mkl-avx512"]["rounds_ms"] == [300.0, 270.0]
    faster_both = {**idle, "mkl-avx512": {"decode_ms": 200.0, "tokens": words}}
    assert choose(MKL_AVX2, [busy, faster_both]).kernels.label == "mkl-avx512"
    words_moved = {**faster_both, "mkl-avx512": {"decode_ms": 200.0, "tokens": [[9]]}}
    assert choose(MKL_AVX2, [busy, words_moved]).kernels is None


def test_ctranslate2s_own_pick_is_read_from_its_log(tiny: Path, no_ct2_variables) -> None:
    flags = cpu_flags()
    if not ct2_kernels.candidates(flags):
        pytest.skip("no AVX2: nothing to choose between on this CPU")
    own = ct2_kernels.probe(tiny, None, clips=0)["own"]
    assert own in {k.label for k in ct2_kernels.candidates(flags)}
    forced = ct2_kernels.probe(tiny, ONEDNN_AVX2, clips=1)
    assert forced["own"] == "onednn-avx2"  # the variables reach CTranslate2 in the probe
    assert forced["decode_ms"] > 0 and len(forced["tokens"]) == 1 and forced["tokens"][0]


def test_the_measurement_is_kept_and_measured_again_for_another_cpu(
    tiny: Path, tmp_path: Path, no_ct2_variables: pytest.MonkeyPatch
) -> None:
    if not ct2_kernels.candidates(cpu_flags()):
        pytest.skip("no AVX2: nothing to measure on this CPU")
    no_ct2_variables.setenv(DERIVED_ENV, str(tmp_path / "derived"))
    first = ct2_kernels.kernels_for(tiny)
    assert first.reason.startswith("measured:"), first.reason
    assert set(first.figures) == {k.label for k in ct2_kernels.candidates(cpu_flags())}
    assert all(f["decode_ms"] > 0 for f in first.figures.values())
    assert sum(f["ctranslate2_own"] for f in first.figures.values()) == 1

    def no_measuring(*_: object) -> KernelChoice:
        raise RuntimeError("measured again")

    no_ct2_variables.setattr(ct2_kernels, "measure", no_measuring)
    kept = ct2_kernels.kernels_for(tiny)
    assert (kept.label, kept.figures) == (first.label, first.figures)
    recipe = ct2_kernels.cpu_recipe(cpu_flags())
    no_ct2_variables.setattr(ct2_kernels, "cpu_recipe", lambda flags: recipe + ";another")
    again = ct2_kernels.kernels_for(tiny)  # another CPU: measuring fails here, and is said
    assert again.kernels is None and "measured again" in again.reason


def test_a_measurement_starts_one_probe_per_candidate_and_round(
    tiny: Path, no_ct2_variables: pytest.MonkeyPatch
) -> None:
    flags = cpu_flags()
    found = ct2_kernels.candidates(flags)
    if not found:
        pytest.skip("no AVX2: nothing to measure on this CPU")
    started: list[str | None] = []
    real = ct2_kernels.probe

    def counted(model_dir: Path, kernels: object, clips: int = ct2_kernels.CLIPS) -> dict:
        started.append(getattr(kernels, "label", None))
        return real(model_dir, kernels, clips=1)  # one clip each: the count is what is tested

    no_ct2_variables.setattr(ct2_kernels, "probe", counted)
    choice = ct2_kernels.measure(tiny, flags)
    assert len(started) == len(found) * ct2_kernels.ROUNDS  # no process only to read the pick
    assert started[0] is None  # CTranslate2's own pick, unforced, measured in the first round
    own = [label for label, f in choice.figures.items() if f["ctranslate2_own"]]
    assert len(own) == 1 and own[0] not in started[: len(found)]
    assert all(len(f["rounds_ms"]) == ct2_kernels.ROUNDS for f in choice.figures.values())


def test_variables_force_a_choice_and_the_users_own_win(
    tiny: Path, no_ct2_variables: pytest.MonkeyPatch
) -> None:
    if not ct2_kernels.candidates(cpu_flags()):
        pytest.skip("no AVX2: no candidate to force on this CPU")
    no_ct2_variables.setenv(ct2_kernels.KERNELS_ENV, "onednn-avx2")
    assert ct2_kernels.kernels_for(tiny).kernels == ONEDNN_AVX2
    no_ct2_variables.setenv(ct2_kernels.KERNELS_ENV, "ctranslate2")
    assert ct2_kernels.kernels_for(tiny).kernels is None
    no_ct2_variables.setenv(ct2_kernels.KERNELS_ENV, "fastest-please")
    refused = ct2_kernels.kernels_for(tiny)
    assert refused.kernels is None and "mkl-avx2" in refused.reason
    no_ct2_variables.setenv(ct2_kernels.KERNELS_ENV, "onednn-avx2")
    no_ct2_variables.setenv("CT2_USE_MKL", "1")
    users = ct2_kernels.kernels_for(tiny)
    assert users.kernels is None and "set by the user" in users.reason


def test_a_worker_decodes_with_the_kernels_chosen(
    tiny: Path, no_ct2_variables: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    if not ct2_kernels.candidates(cpu_flags()):
        pytest.skip("no AVX2: no candidate to force on this CPU")
    no_ct2_variables.setenv(ct2_kernels.KERNELS_ENV, "onednn-avx2")
    no_ct2_variables.setenv("CT2_VERBOSE", "1")  # CTranslate2 logs its kernels on stderr
    config = PoolConfig(
        model_dir=tiny, model_name="tiny.en", workers=1, encoder_backend="ctranslate2"
    )
    clip = parse_wav((SPEECH / "jfk.wav").read_bytes())

    async def body(pool: WorkerPool) -> tuple[str, str]:
        answer = await pool.transcribe(clip, "en")
        await asyncio.sleep(0)
        return pool.encoder.kernels, answer.text.lower()

    kernels, text = run_with_pool(config, body)
    logged = capfd.readouterr().err
    assert kernels == "onednn-avx2" and "country" in text
    assert "Use Intel MKL: false" in logged and "Selected ISA: AVX2" in logged
