"""byoa-bench: its statistics, protocol client and comparison, and one tiny run of every
scenario whose report is checked for structure and consistency (never for speed)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from byoa_skills.bench import cli, compare, plots
from byoa_skills.bench.phases import PARTS, goal_budget, parts_of, phase_split
from byoa_skills.bench.report import budget_line
from byoa_skills.bench.scenarios import default_names, names
from byoa_skills.bench.server import Timed, parse_server_timing, server_timing_window
from byoa_skills.bench.stats import spread_of, summarize
from byoa_skills.bench.wyoming import encode_event, read_event

STAT_KEYS = {"min", "p50", "p95", "p99", "max"}


def test_summarize_orders_percentiles_and_measures_spread() -> None:
    stats = summarize([3.0, 1.0, 2.0, 10.0], [[1.0, 2.0], [3.0, 10.0]])
    assert stats.min <= stats.p50 <= stats.p95 <= stats.p99 <= stats.max
    assert (stats.n, stats.min, stats.max, stats.mean) == (4, 1.0, 10.0, 4.0)
    assert stats.spread == pytest.approx((6.5 - 1.5) / 4.0)
    assert summarize([2.0, 2.0]).spread == 0.0
    assert spread_of([1.0]) == 0.0 and spread_of([1.0, 2.0, 3.0]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        summarize([])


def test_server_timing_header_is_read_in_seconds() -> None:
    assert parse_server_timing("queue;dur=1.5, infer;dur=900") == {
        "queue": 0.0015,
        "infer": 0.9,
    }
    assert parse_server_timing("") == {}
    header = 'queue;dur=0.2, infer;dur=80.5, window;desc="10s"'
    assert server_timing_window(header) == 10.0
    assert server_timing_window('window;desc="5s", infer;dur=3') == 5.0
    assert server_timing_window("queue;dur=1.5, infer;dur=900") is None


def test_a_calls_wait_is_split_into_parts_that_add_up_to_it() -> None:
    header = (
        "queue;dur=40, infer;dur=300, features;dur=10, encode;dur=100, detect;dur=0, "
        'decode;dur=180, handoff;dur=2, window;desc="30s", encoder;desc="openvino-int8"'
    )
    timing = parse_server_timing(header)
    call = Timed(0.350, timing["queue"], timing["infer"], 30.0, timing)
    parts = parts_of(call)
    assert list(parts) == list(PARTS)
    assert parts["worker"] == pytest.approx(0.010)  # the model's time outside its phases
    assert parts["api"] == pytest.approx(0.008)  # 350 - 40 - 300 - 2
    assert sum(parts.values()) == pytest.approx(call.waited)
    split = phase_split([call, Timed(0.150, 0.0, 0.1, 30.0, {"encode": 0.05, "decode": 0.05})])
    assert split["calls"] == 2 and split["waited_ms"] == pytest.approx(250)
    assert split["ms"]["encode"] == pytest.approx(75) and split["ms"]["queue"] == pytest.approx(20)
    assert split["share"]["decode"] == pytest.approx(115 / 250)


def test_the_goal_budget_says_what_the_encode_may_take() -> None:
    ms = {"queue": 50, "features": 8, "encode": 370, "detect": 0, "decode": 313}
    ms |= {"worker": 4, "handoff": 2, "api": 3}
    split = {"concurrency": 2, "calls": 40, "waited_ms": 750.0, "ms": ms}
    budget = goal_budget(split, workers=2, yardstick=1.49, goal=2.5)
    assert budget is not None
    assert budget["allowed_ms"] == pytest.approx(2000 / (2.5 * 1.49))
    assert budget["busy_ms"] == pytest.approx(697)  # neither the queue nor the API process
    assert budget["encode_allowed_ms"] == pytest.approx(2000 / (2.5 * 1.49) - 327)
    line = budget_line(budget)
    assert "allows 537 ms" in line and "at most 210 ms (now 370)" in line
    slow_yardstick = goal_budget(split, workers=2, yardstick=0.5, goal=2.5)
    assert slow_yardstick is not None and slow_yardstick["encode_allowed_ms"] == pytest.approx(1273)
    fast_yardstick = goal_budget(split, workers=2, yardstick=5.0, goal=2.5)
    assert fast_yardstick is not None and fast_yardstick["encode_allowed_ms"] < 0
    assert "out of the encoder's reach" in budget_line(fast_yardstick)
    assert goal_budget(dict(split, calls=0), workers=2, yardstick=1.49, goal=2.5) is None
    assert goal_budget(split, workers=2, yardstick=0.0, goal=2.5) is None


def test_wyoming_events_round_trip() -> None:
    async def go() -> list[tuple[str, dict[str, Any], bytes]]:
        reader = asyncio.StreamReader()
        reader.feed_data(encode_event("transcribe", {"language": "en"}))
        reader.feed_data(encode_event("audio-chunk", {"rate": 16000}, b"\x01\x02" * 10))
        reader.feed_data(encode_event("audio-stop"))
        reader.feed_eof()
        return [await read_event(reader) for _ in range(3)]

    first, chunk, stop = asyncio.run(go())
    assert first == ("transcribe", {"language": "en"}, b"")
    assert chunk == ("audio-chunk", {"rate": 16000}, b"\x01\x02" * 10)
    assert stop == ("audio-stop", {}, b"")
    header = json.loads(encode_event("audio-chunk", {"a": 1}, b"xy").split(b"\n")[0])
    assert header["data_length"] == len(b'{"a": 1}') and header["payload_length"] == 2


def _doc(**values: float) -> dict[str, Any]:
    return {
        "headline": {
            key: {
                "value": v,
                "unit": "x",
                "better": "higher" if "put" in key else "lower",
                "label": key,
            }
            for key, v in values.items()
        }
    }


def test_compare_states_each_change_and_its_direction() -> None:
    rows = {
        r["key"]: r
        for r in compare.changes(
            _doc(throughput=2.0, latency=1.0, gone=1.0), _doc(throughput=3.0, latency=1.5, new=1.0)
        )
    }
    assert rows["throughput"]["change"] == pytest.approx(0.5) and rows["throughput"]["better"]
    assert rows["latency"]["change"] == pytest.approx(0.5) and rows["latency"]["better"] is False
    assert rows["gone"]["new"] is None and rows["new"]["old"] is None
    assert "| throughput | x | 2 | 3 | +50.0% |" in compare.markdown(list(rows.values()))


def test_unknown_scenario_is_refused(tmp_path: Path) -> None:
    assert cli.main(["--out", str(tmp_path), "nonsense"]) == 2


@pytest.fixture(scope="module")
def run_temp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the tiny run makes its temporary files in."""
    return tmp_path_factory.mktemp("bench-temp")


@pytest.fixture(scope="module")
def tiny_run(
    tmp_path_factory: pytest.TempPathFactory, run_temp: Path
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every scenario once, with ``tiny.en``, few calls and a sweep of 1 and 2."""
    out = tmp_path_factory.mktemp("bench-out")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(run_temp))
        code = _tiny_run(out)
    assert code == 0
    yield out, json.loads((out / "results.json").read_text())


def test_a_run_leaves_no_temporary_file_and_keeps_its_servers_logs(
    tiny_run: tuple[Path, dict[str, Any]], run_temp: Path
) -> None:
    out, _ = tiny_run
    assert not list(run_temp.glob("byoa-bench*"))  # the run's home, the scenarios' folders
    kept = {path.name for path in (out / "logs").iterdir()}
    assert {"serve-memory.log", "serve-cold-0.log", "peer.log"} <= kept, sorted(kept)


def _tiny_run(out: Path) -> int:
    return cli.main(
        [
            "--quick",
            "--model",
            "tiny.en",
            "--calls",
            "3",
            "--repeats",
            "1",
            "--sweep",
            "1,2",
            "--out",
            str(out),
            *default_names(),  # --quick alone runs only the headline scenarios
        ]
    )


def test_quick_alone_runs_the_headline_scenarios_and_names_them_in_its_help() -> None:
    quick = default_names(quick=True)
    assert quick == ["wav", "direct", "kernels", "engine", "accuracy"]
    assert set(quick) < set(default_names())
    assert all(name in cli.parser().format_help() for name in quick)


def _stats(node: Any) -> Iterator[dict[str, float]]:
    """Every summary of timings (differences of timings, which may be negative, excepted)."""
    if isinstance(node, dict):
        if node.keys() >= STAT_KEYS:
            yield node
        for key, value in node.items():
            if key != "added_ms":
                yield from _stats(value)
    elif isinstance(node, list):
        for value in node:
            yield from _stats(value)


@pytest.mark.slow
def test_tiny_run_writes_a_consistent_report(tiny_run: tuple[Path, dict[str, Any]]) -> None:
    out, results = tiny_run
    scenarios = results["scenarios"]
    by_name_only = ("longmemory", "tune", "encoder", "judge")
    assert list(scenarios) == default_names() == [n for n in names() if n not in by_name_only]
    assert {e["status"] for e in scenarios.values()} <= {"ok", "skipped"}
    for name in (
        "wav",
        "direct",
        "cold",
        "engine",
        "memory",
        "idle",
        "link",
        "text",
        "batch",
        "store",
    ):
        assert scenarios[name]["status"] == "ok", scenarios[name]
    if results["machine"]["gpu"]["cuda_devices"] == 0:
        assert scenarios["gpu"]["status"] == "skipped" and "GPU" in scenarios["gpu"]["reason"]

    machine = results["machine"]
    assert machine["cores"] >= 1 and machine["cpu"]
    assert {"numpy", "ctranslate2", "faster-whisper", "onnxruntime", "aiohttp"} <= set(
        machine["libraries"]
    )
    assert results["model"]["name"] == "tiny.en"
    assert all(len(f["sha256"]) == 64 for f in results["model"]["files"])
    assert results["decode_options"]["beam_size"] >= 1

    found = list(_stats(results["scenarios"]))
    assert len(found) > 20
    for stats in found:
        assert 0 < stats["min"] <= stats["p50"] <= stats["p95"] <= stats["p99"] <= stats["max"]
        # every repeat's median lies between the smallest and the largest sample
        widest = (stats["max"] - stats["min"]) / stats["min"]
        assert 0 <= stats["spread"] <= widest * (1 + 1e-9), stats

    direct = scenarios["direct"]
    assert set(direct["layouts"]) == {
        f"{p}x{machine['cores'] // p}"
        for p in range(1, machine["cores"] + 1)
        if machine["cores"] % p == 0
    }
    assert direct["best_throughput"] == max(x["throughput"] for x in direct["layouts"].values())
    # the short-window yardstick: the runtime with the engine's own windows, every layout
    assert set(direct["short_layouts"]) == set(direct["layouts"])
    short = direct["short_layouts"][direct["best_short"]]
    assert direct["best_short_throughput"] == short["throughput"] > 0
    assert short["throughput"] == max(x["throughput"] for x in direct["short_layouts"].values())
    # the yardstick: faster-whisper's own transcribe, every layout
    assert set(direct["faster_whisper_layouts"]) == set(direct["layouts"])
    yardstick = direct["faster_whisper_layouts"][direct["faster_whisper_best"]]
    assert direct["faster_whisper_best_throughput"] == yardstick["throughput"] > 0

    # the floor per clip group, and the engine's p50 over it from the same run
    groups = {"1-2s", "3-6s", "6-15s"}
    floor = scenarios["floor"]
    assert set(floor["groups"]) == groups
    for figures in floor["groups"].values():
        assert figures["floor_s"]["p50"] > 0 and all(t > 0 for t in figures["tokens"])
        assert figures["windows_s"] and all(w in (5, 10, 15, 30) for w in figures["windows_s"])
    real = results["clips"]["real"]
    assert set(real) == groups and all(real[g] for g in groups)
    for name, low, high in (("1-2s", 1, 2), ("3-6s", 3, 6), ("6-15s", 6, 15)):
        assert all(low <= clip["seconds"] <= high for clip in real[name])

    engine = scenarios["engine"]
    assert engine["vs_direct_best"] == pytest.approx(
        engine["best_throughput"] / direct["best_throughput"]
    )
    assert engine["vs_direct_best_short"] == pytest.approx(
        engine["best_throughput"] / direct["best_short_throughput"]
    )
    assert engine["vs_faster_whisper"] == pytest.approx(
        engine["best_throughput"] / direct["faster_whisper_best_throughput"]
    )
    assert results["headline"]["engine_vs_faster_whisper"]["value"] == engine["vs_faster_whisper"]
    rates = {level["concurrency"]: level["throughput"] for level in engine["sweep"]}
    budget = engine["goal_budget"]  # taken at as many calls as workers, where the sweep has it
    if engine["workers"] not in rates:
        assert budget is None
    else:
        assert budget["concurrency"] == engine["workers"]
        assert budget["allowed_ms"] == pytest.approx(
            engine["workers"] * 1000 / (2.5 * direct["faster_whisper_best_throughput"])
        )
        assert 0 < budget["encode_ms"] < budget["busy_ms"]
        allowed = results["headline"]["engine_encode_allowed_ms"]["value"]
        assert allowed == budget["encode_allowed_ms"]
    assert engine["c2_vs_c1"] == pytest.approx(rates[2] / rates[1])
    # where each level's time went: every part measured, adding up to the mean wait
    assert [split["concurrency"] for split in engine["phase_split"]] == list(rates)
    for split in engine["phase_split"]:
        assert split["calls"] >= 2 * split["concurrency"]
        assert list(split["ms"]) == list(PARTS)
        assert split["ms"]["encode"] > 0 and split["ms"]["decode"] > 0
        assert sum(split["ms"].values()) == pytest.approx(split["waited_ms"], rel=0.02)
    assert set(engine["group_latency_s"]) == set(engine["vs_floor"]) == groups
    for name, stats in engine["group_latency_s"].items():
        assert engine["vs_floor"][name] == pytest.approx(
            stats["p50"] / floor["groups"][name]["floor_s"]["p50"]
        )
        assert results["headline"][f"engine_vs_floor_{name}"]["value"] == engine["vs_floor"][name]
    # each group split by the window that answered: every call of the group in one of them,
    # the clips of the languages that keep the whole window on it
    split = engine["group_latency_by_window_s"]
    assert set(split) == groups
    languages = {clip["key"]: clip["language"] for g in real.values() for clip in g}
    for name, sides in split.items():
        assert sides and set(sides) <= {"short", "whole"}
        assert sum(side["calls"] for side in sides.values()) == len(real[name])  # 1 repeat
        for figure in sides.values():
            assert figure["p50"] > 0
            assert set(figure["languages"]) <= set(languages.values())
    # the default decode is the whole window, for tiny.en as for every model
    assert all(set(sides) == {"whole"} for sides in split.values())
    assert set(scenarios["peer"]["group_latency_s"]) == groups
    for label in ("1s", "5s", "15s"):
        assert engine["overhead_ms"][label]["p50"] > 0
        # the engine's own timing is part of the client's wait
        assert engine["infer_s"][label]["p50"] < engine["latency_s"][label]["p50"]
    sweeps = [engine["sweep"], scenarios["peer"]["sweep"], scenarios["link"]["sweep"]]
    for sweep in sweeps:
        assert [level["concurrency"] for level in sweep] == [1, 2]
        for level in sweep:
            in_flight = level["throughput"] * level["latency_s"]["mean"]  # Little's law
            assert 0.2 * level["concurrency"] < in_flight <= 1.1 * level["concurrency"]

    kernels = scenarios["kernels"]
    if kernels["status"] == "ok":  # any CPU with AVX2
        rows = kernels["candidates"]
        assert kernels["own"] in rows and rows[kernels["own"]]["vs_own"] == pytest.approx(1.0)
        assert all(r["decode_ms"] > 0 and r["vs_own"] > 0 for r in rows.values())
        chosen = kernels["own"] if kernels["chosen"] == "ctranslate2" else kernels["chosen"]
        assert rows[chosen]["same_words"]
        report_md = (out / "report.md").read_text()
        assert "CTranslate2's CPU kernels" in report_md and kernels["reason"] in report_md

    cold = scenarios["cold"]
    assert cold["first_vs_warm"] == pytest.approx(
        cold["first_call_s"]["p50"] / cold["warm_median_s"]
    )
    memory = scenarios["memory"]
    assert len(memory["worker_rss_mib"]) == machine["cores"]
    assert all(v > 0 for v in memory["worker_rss_mib"].values()) and memory["front_rss_mib"] > 0
    for pid, peak in memory["worker_peak_mib"].items():
        assert peak >= memory["worker_rss_mib"][pid]
        kinds = memory["worker_resident_mib"][pid]
        assert kinds["anon"] > 0 and kinds["file"] > 0
        assert sum(kinds.values()) == pytest.approx(memory["worker_rss_mib"][pid], abs=2)
    # an engine of its own, started once the run's engine had built the derived files
    run_engine = {str(pid) for pid in scenarios["engine"]["worker_pids"]}
    assert run_engine and not run_engine & set(memory["worker_peak_mib"])
    if memory["encoder"].startswith("openvino"):  # measured beside CTranslate2 alone
        alone = memory["ctranslate2_alone"]
        assert len(alone["worker_peak_mib"]) == machine["cores"]
        # the VAD runs on OpenVINO beside an OpenVINO encoder, on onnxruntime beside CTranslate2's
        assert (memory["vad"], alone["vad"]) == ("openvino", "onnxruntime")
        assert memory["peak_vs_ctranslate2"] == pytest.approx(
            memory["worker_peak_max_mib"] / alone["worker_peak_max_mib"]
        )
        ranked = memory["peaks_vs_ctranslate2"]
        assert ranked[0] == pytest.approx(memory["peak_vs_ctranslate2"], abs=1e-3)
        assert ranked[-1] == pytest.approx(
            min(memory["worker_peak_mib"].values()) / min(alone["worker_peak_mib"].values()),
            abs=1e-3,
        )
        assert results["headline"]["worst_peak_vs_ctranslate2"]["value"] == max(ranked)
        assert "Each worker's peak / CTranslate2 alone's" in (out / "report.md").read_text()

    idle = scenarios["idle"]
    # with the workers let go the whole engine is the front process (and its helpers) alone
    assert 0 < idle["idle_rss_mib"] < idle["warm_rss_mib"] - 100 * (idle["workers"] - 0.5)
    assert idle["grant_to_warm_s"]["p50"] > 0 and idle["first_call_s"]["p50"] > 0

    assert scenarios["peer"]["status"] == "ok", scenarios["peer"]  # the dev extra installs it
    assert scenarios["peer"]["texts"]["5s"].strip()
    assert "engine_vs_peer_c2" in results["headline"]
    link = scenarios["link"]
    assert link["max_parallel_calls"] == 8
    assert results["headline"]["link_throughput"]["value"] > 0
    assert all(link["latency_s"][label]["p50"] > 0 for label in ("1s", "5s", "15s"))

    batch = scenarios["batch"]
    assert batch["best"] in batch["configs"] and len(batch["configs"]) == 2
    for figures in batch["configs"].values():
        assert set(figures["throughput"]) == {"1s", "5s", "15s", "mix"}
        assert all(rate > 0 for rate in figures["throughput"].values())
        assert figures["vs_direct_best"] == pytest.approx(
            figures["throughput"]["mix"] / direct["best_throughput"]
        )
    assert {"2x1 b1 enc30", "1x2 b8 enc15"} <= set(batch["configs"]) or machine["cores"] != 2

    text = scenarios["text"]
    assert set(text["sources"]) == {"instant", "smollm2"}  # the dev extra installs llama.cpp
    for source in text["sources"].values():
        assert source["added_p50_ms"] == pytest.approx(
            source["engine_ms"]["p50"] - source["direct_ms"]["p50"]
        )
        assert source["direct_ms"]["n"] == source["engine_ms"]["n"] == source["added_ms"]["n"]
        assert source["added_ms"]["min"] <= source["added_ms"]["p50"] <= source["added_ms"]["max"]

    store = scenarios["store"]
    assert (store["sites"], store["activity_entries"]) == (1_000, 100_000)
    for key in ("grant_created_ms", "call_recorded_ms", "call_committed_ms", "site_query_ms"):
        assert store[key]["n"] == store["samples"]
    assert store["call_recorded_ms"]["p50"] <= store["call_committed_ms"]["p50"]
    assert store["burst_recorded"] == store["burst_calls"] == 1000, "the burst was recorded"
    assert store["burst_stall_samples"] > 0, "the loop's lateness was measured during it"
    assert store["database_mib"] > 1

    longform = scenarios["longform"]
    assert longform["status"] == "ok", longform
    assert longform["recording_s"] >= 40 and longform["workers"] == machine["cores"]
    assert longform["source"].endswith("longform-en.json")  # real speech, with its reference
    assert longform["speedup_vs_faster"] == pytest.approx(
        min(longform["transcribe_s"], longform["batched_s"]) / longform["engine_s"]
    )
    assert all(0 <= rate <= 1 for rate in longform["wer"].values())
    assert longform["site_idle_s"] > 0 and longform["site_calls_during"] >= 1

    accuracy = scenarios["accuracy"]
    assert accuracy["status"] == "ok", accuracy
    assert set(accuracy["ways"]) == {"whole", "engine"}
    for way in accuracy["ways"].values():
        assert set(way["wer"]) == {"en"}  # tiny.en hears English only
        assert 0 <= way["wer_all"] <= 1 and 0 <= way["decoded_again_rate"] <= 1
        assert sum(way["answered_by"].values()) >= 1
    engine_way = accuracy["ways"]["engine"]
    # tiny.en was not measured per language: it keeps the one 15 s window (or the whole)
    assert {key.split(" s,")[0] for key in engine_way["answered_by"]} <= {"15", "30"}
    assert "guard_decoded_again_rate" in results["headline"]
    assert "wer_engine_en" in results["headline"] and "wer_whole_en" in results["headline"]

    headline = results["headline"]
    for key in (
        "direct_best_throughput",
        "engine_throughput",
        "engine_vs_direct_best",
        "engine_overhead_1s_p50_ms",
        "first_call_s",
        "warm_median_s",
        "worker_rss_max_mib",
    ):
        assert headline[key]["value"] > 0
    report = (out / "report.md").read_text()
    assert "## Engine over the local API (`engine`)" in report
    assert "## Direct link, site to wallet (`link`)" in report
    assert "engine minus direct" in report
    assert "one site's newest 100 entries" in report
    assert "## A long recording across the pool (`longform`)" in report
    assert "## The machine's floor: raw CTranslate2, one thread (`floor`)" in report
    assert "## Words kept on real speech, per language (`accuracy`)" in report
    assert "x the floor)" in report
    assert plots.available()  # the dev extra installs matplotlib
    for name in ("concurrency.png", "latency-by-clip.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_compare_prints_changes_against_an_earlier_run(
    tiny_run: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, _ = tiny_run
    code = cli.main(
        [
            "--quick",
            "--model",
            "tiny.en",
            "--no-plots",
            "--out",
            str(tmp_path),
            "--compare",
            str(old / "results.json"),
            "wav",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "Against the earlier run" in printed and "15 s clip from bytes" in printed
    assert "## Against the earlier run" in (tmp_path / "report.md").read_text()
    results = json.loads((tmp_path / "results.json").read_text())
    assert list(results["scenarios"]) == ["wav"]
    assert not (tmp_path / "concurrency.png").exists()


def test_the_soak_reports_serve_growth_from_the_engine_start_and_after_the_warm_up() -> None:
    from byoa_skills.bench.scenarios.soak import serve_growth

    def snap(mb: float) -> dict[str, Any]:
        return {"processes": {"serve": {"rss_mb": mb}}}

    growth = serve_growth(snap(68.2), snap(78.4), snap(79.9))
    assert growth == {"from_engine_start": 17.2, "after_warmup": 1.9}
    assert serve_growth({}, snap(78.4), snap(79.9))["from_engine_start"] is None


def test_a_group_is_split_by_the_window_that_answered_its_calls() -> None:
    from byoa_skills.bench.scenarios.enginerun import group_latency_by_window
    from byoa_skills.bench.server import Timed

    timed = {
        "en-a": [Timed(0.1, 0.0, 0.08, 5.0), Timed(0.12, 0.0, 0.1, 5.0)],
        "fr-b": [Timed(0.9, 0.0, 0.85, 30.0)],
        "ru-c": [Timed(0.7, 0.0, 0.65, 30.0), Timed(0.5, 0.0, 0.3, None)],  # no window said
    }
    languages = {"en-a": "en", "fr-b": "fr", "ru-c": "ru"}
    split = group_latency_by_window({"1-2s": ["en-a", "fr-b", "ru-c"]}, timed, languages)
    assert split == {
        "1-2s": {
            "short": {"calls": 2, "p50": pytest.approx(0.11), "languages": ["en"]},
            "whole": {"calls": 2, "p50": pytest.approx(0.8), "languages": ["fr", "ru"]},
        }
    }
