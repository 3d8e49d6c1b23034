"""``byoa-bench encoder``'s report: its table and what it says of bf16 (figures made up; the
scenario itself runs by name only, on the machine being measured)."""

from __future__ import annotations

from typing import Any

from byoa_skills.bench import report
from byoa_skills.bench.scenarios import BY_NAME_ONLY, default_names


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
            "ctranslate2-int8": {"edits": 0, "words": 180},
            "ctranslate2-float32": {"edits": 9, "words": 180},
            "openvino-f32": {"edits": 7, "words": 180},
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
    assert "openvino-f32 7 edits on 180 words" in said
    assert "ctranslate2-float32 9 edits on 180 words" in said
    assert "bf16 not measured" in said and "AVX2" in said
    assert "not measured" not in report._scenario_lines("encoder", entry(bf16=True))[-1]


def test_the_run_prints_the_table_and_only_a_named_run_measures_it() -> None:
    (table,) = report.tables({"scenarios": {"encoder": entry(bf16=False)}})
    assert table.row_count == 6 and len(table.columns) == 7
    assert report.tables({"scenarios": {"encoder": {"status": "skipped"}}}) == []
    assert "encoder" in BY_NAME_ONLY and "encoder" not in default_names()
