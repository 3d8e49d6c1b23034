"""The layout ``byoa-bench tune`` chose: kept in the user's config, read back by ``serve``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine import Engine, start_engine

from byoa_skills.bench.scenarios.tune import candidates, choose
from byoa_skills.cli import build_parser
from byoa_skills.commands.serve import pool_config
from byoa_skills.pool.config import available_cores
from byoa_skills.pool.tuned import FILE_NAME, TunedLayout, read_tuned, write_tuned


def layout(workers: int = 1, threads: int = 2, batch: int = 3) -> TunedLayout:
    return TunedLayout(workers=workers, threads=threads, max_batch=batch, cores=available_cores())


def test_a_layout_is_kept_private_and_read_back_per_model_and_device(tmp_path: Path) -> None:
    path = tmp_path / "config" / FILE_NAME
    write_tuned("base", "cpu", layout(), path)
    write_tuned("tiny.en", "cpu", layout(workers=2, threads=1, batch=1), path)
    assert os.stat(path).st_mode & 0o777 == 0o600
    kept = read_tuned("base", "cpu", path)
    assert kept is not None and kept.describe() == "1x2 b3" and kept.measured_at
    assert read_tuned("tiny.en", "cpu", path).describe() == "2x1 b1"  # type: ignore[union-attr]
    assert read_tuned("base", "cuda", path) is None
    assert read_tuned("small", "cpu", path) is None


def test_a_layout_measured_on_other_cores_or_a_damaged_file_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    assert read_tuned("base", "cpu", path) is None  # none measured yet
    other = TunedLayout(workers=1, threads=1, max_batch=1, cores=available_cores() + 1)
    write_tuned("base", "cpu", other, path)
    assert read_tuned("base", "cpu", path) is None
    for damaged in (b"{not json", b"[]", b'{"layouts": 3}', b"\xff\xfe"):
        path.write_bytes(damaged)
        assert read_tuned("base", "cpu", path) is None
    entry = {"workers": 0, "threads": 1, "max_batch": 1, "cores": available_cores()}
    path.write_text(json.dumps({"layouts": {"base@cpu": entry}}))
    assert read_tuned("base", "cpu", path) is None  # no pool runs 0 workers
    path.write_text(json.dumps({"layouts": {"base@cpu": {**entry, "workers": 1, "x": 1}}}))
    assert read_tuned("base", "cpu", path) is None  # an unknown field
    write_tuned("base", "cpu", layout(), path)  # a damaged file is replaced whole
    assert read_tuned("base", "cpu", path) is not None


def test_flags_win_over_the_tuned_layout_field_by_field() -> None:
    parse = build_parser().parse_args
    tuned = layout()
    config = pool_config(parse(["serve"]), "base", Path("m"), "cpu", tuned=tuned)
    assert (config.workers, config.threads_per_worker, config.max_batch) == (1, 2, 3)
    assert config.layout_source.startswith("tuned")
    config = pool_config(parse(["serve", "--workers", "3"]), "base", Path("m"), "cpu", tuned)
    assert (config.workers, config.threads_per_worker, config.max_batch) == (3, 2, 3)
    every = ["serve", "--workers", "2", "--threads", "1", "--max-batch", "1"]
    config = pool_config(parse(every), "base", Path("m"), "cpu", tuned=tuned)
    assert (config.workers, config.threads_per_worker, config.max_batch) == (2, 1, 1)
    assert config.layout_source == "flags"
    config = pool_config(parse(["serve"]), "base", Path("m"), "cpu")
    assert config.layout_source == "default" and config.threads_per_worker == 1


def test_tune_takes_the_most_throughput_and_the_faster_lone_call_on_a_tie() -> None:
    def figures(throughput: float, latency: float) -> dict[str, object]:
        return {"throughput": throughput, "latency_c1_s": {"p50": latency}}

    assert choose({"a": figures(2.0, 1.0), "b": figures(1.5, 0.5)}) == "a"
    assert choose({"a": figures(2.0, 1.0), "b": figures(1.95, 0.6)}) == "b"
    found = candidates(2, quick=False)
    assert {(w * t) for w, t, _ in found} == {2} and {b for *_, b in found} == {1, 4}
    assert all(b == 1 for *_, b in candidates(4, quick=True))


@pytest.fixture
def tuned_engine(engine_home: Path, tmp_path: Path) -> Iterator[Engine]:
    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")
    write_tuned(
        "tiny.en", "cpu", layout(workers=1, threads=2, batch=3), home / "config" / FILE_NAME
    )
    running = start_engine(home, "--model", "tiny.en")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def test_serve_starts_with_the_tuned_layout_and_shows_it(tuned_engine: Engine) -> None:
    assert len(tuned_engine.workers()) == 1
    _, text = tuned_engine.get("/metrics")
    info = next(line for line in text.splitlines() if line.startswith("byoa_pool_layout_info"))
    assert 'workers="1"' in info and 'threads="2"' in info and 'batch="3"' in info
    assert 'source="tuned ' in info
    assert "threads=2 batch=3 layout='tuned" in tuned_engine.log.read_text()


@pytest.mark.slow
def test_byoa_bench_tune_measures_and_keeps_a_layout_serve_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from byoa_skills.bench import cli

    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path / "user"))
    out = tmp_path / "out"
    argv = ["tune", "--quick", "--model", "tiny.en", "--calls", "3", "--out", str(out)]
    assert cli.main([*argv, "--no-plots"]) == 0
    figures = json.loads((out / "results.json").read_text())["scenarios"]["tune"]
    assert figures["status"] == "ok" and set(figures["candidates"]) == {
        f"{w}x{t} b{b}" for w, t, b in candidates(available_cores(), quick=True)
    }
    assert all(c["throughput"] > 0 for c in figures["candidates"].values())
    kept = read_tuned("tiny.en", "cpu", tmp_path / "user" / "config" / FILE_NAME)
    assert kept is not None and kept.describe() == figures["best"]
    assert set(kept.figures) == set(figures["candidates"])
