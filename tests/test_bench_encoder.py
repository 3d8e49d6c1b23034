"""``byoa-bench encoder``'s report: its table and what it says of bf16 (figures made up; the
scenario itself runs by name only, on the machine being measured)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from byoa_skills.bench import report
from byoa_skills.bench.roofline import EncoderShape, peak_gflops, precision_of
from byoa_skills.bench.scenarios import BY_NAME_ONLY, default_names
from byoa_skills.models import model_path


def entry(bf16: bool) -> dict[str, Any]:
    backends = ["ctranslate2-int8", "ctranslate2-float32", "openvino-f32"]
    p50 = {"ctranslate2-int8": 0.6, "ctranslate2-float32": 0.9, "openvino-f32": 0.75}
    stats = {
        b: {"min": p50[b], "p50": p50[b], "p95": p50[b], "p99": p50[b], "max": p50[b]}
        for b in backends
    }
    return {
        "status": "ok",
        "backends": backends,
        "windows_s": [5.0, 30.0],
        "threads": [1, 2],
        "encode_s": {
            b: {t: {w: stats[b] for w in ("5", "30")} for t in ("1", "2")} for b in backends
        },
        "vs_default": {
            b: {t: {w: p50[b] / 0.6 for w in ("5", "30")} for t in ("1", "2")} for b in backends
        },
        "cosine_vs_float32": {b: {"5": 0.99, "30": 1.0} for b in backends},
        "word_edits_vs_int8": {
            "ctranslate2-int8": {"edits": 0, "words": 180, "wer": 0.0634},
            "ctranslate2-float32": {"edits": 9, "words": 180},
            "openvino-f32": {"edits": 7, "words": 180, "wer": 0.0512},
        },
        "clips": 18,
        "bf16_units": bf16,
        "cpu_flags_bf16": ["amx_bf16"] if bf16 else [],
        "ct2_isa": "AVX2",
    }


def test_the_report_has_a_row_per_backend_and_window_and_says_what_was_not_measured() -> None:
    lines = report._scenario_lines("encoder", entry(bf16=False))
    rows = [line for line in lines if line.startswith("| openvino-f32 ")]
    assert rows == [
        "| openvino-f32 | 5 | 750 | 1.25 | 750 | 1.25 | 0.99000 |",
        "| openvino-f32 | 30 | 750 | 1.25 | 750 | 1.25 | 1.00000 |",
    ]
    said = lines[-1]
    assert "openvino-f32 7 edits on 180 words (WER 0.051)" in said
    assert "ctranslate2-float32 9 edits on 180 words;" in said  # no WER kept: none said
    assert "ctranslate2-int8 (WER 0.063)." in said
    assert "bf16 not measured" in said and "AVX2" in said
    assert "not measured" not in report._scenario_lines("encoder", entry(bf16=True))[-1]


def test_the_run_prints_the_table_and_only_a_named_run_measures_it() -> None:
    (table,) = report.tables({"scenarios": {"encoder": entry(bf16=False)}})
    assert table.row_count == 6 and len(table.columns) == 7
    assert report.tables({"scenarios": {"encoder": {"status": "skipped"}}}) == []
    assert "encoder" in BY_NAME_ONLY and "encoder" not in default_names()


def test_the_roofline_counts_the_encoders_work_from_its_shapes(engine_home: Path) -> None:
    base = EncoderShape.of_model(model_path("base", cache_dir=engine_home / "cache" / "models"))
    assert (base.mels, base.width, base.ffn, base.layers) == (80, 512, 2048, 6)
    # about 43.6 GMAC for the whole 30 s window; the attention's T² term grows fastest
    assert 43.0e9 < base.macs(30) < 44.5e9
    assert base.macs(5) < base.macs(30) / 6
    assert [precision_of(b) for b in ("ctranslate2-int8", "openvino-bf16", "openvino-f32")] == [
        "int8",
        "bf16",
        "f32",
    ]


def test_the_probe_measures_a_rate_for_each_precision() -> None:
    rates = {precision: peak_gflops(precision, 1, rounds=2) for precision in ("f32", "int8")}
    assert all(rate > 1 for rate in rates.values()), rates


def test_the_report_says_the_roofline_at_the_whole_window() -> None:
    figures = entry(bf16=False)
    figures["roofline"] = {
        "gmac": {"5": 5.9, "30": 43.7},
        "peak_gflops": {"f32": {"1": 150.0, "2": 290.0}, "int8": {"1": 840.0, "2": 1240.0}},
        "achieved_gflops": {
            b: {"1": {"30": 100.0}, "2": {"30": 180.0}} for b in figures["backends"]
        },
        "share_of_peak": {b: {"1": {"30": 0.5}, "2": {"30": 0.25}} for b in figures["backends"]},
    }
    said = report._scenario_lines("encoder", figures)[-1]
    assert "Roofline at the 30 s window (43.7 GMAC)" in said
    assert "f32 150 / 290; int8 840 / 1240" in said
    assert "ctranslate2-int8 100 (50%) / 180 (25%)" in said
