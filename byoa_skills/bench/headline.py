"""The headline figures of a run: the few numbers a report leads with and ``--compare``
compares, each with its unit and which direction is better."""

from __future__ import annotations

from typing import Any

Figure = dict[str, Any]


def _figure(value: float | None, unit: str, better: str, label: str) -> Figure | None:
    if value is None:
        return None
    return {"value": float(value), "unit": unit, "better": better, "label": label}


def _ok(results: dict[str, Any], name: str) -> dict[str, Any] | None:
    entry = results.get("scenarios", {}).get(name)
    return entry if entry and entry.get("status") == "ok" else None


def headline(results: dict[str, Any]) -> dict[str, Figure]:
    """Headline figures by key (only those the run measured)."""
    out: dict[str, Figure | None] = {}
    if wav := _ok(results, "wav"):
        rows = wav["rows"]
        out["wav_base64_15s_us"] = _figure(
            rows["15s"]["base64"]["p50"], "us", "lower", "15 s clip from base64, p50"
        )
        out["wav_bytes_15s_us"] = _figure(
            rows["15s"]["bytes"]["p50"], "us", "lower", "15 s clip from bytes, p50"
        )
        if "soundfile" in rows["15s"]:
            out["wav_soundfile_15s_us"] = _figure(
                rows["15s"]["soundfile"]["p50"], "us", "lower", "15 s clip, soundfile.read, p50"
            )
    if direct := _ok(results, "direct"):
        out["direct_best_throughput"] = _figure(
            direct["best_throughput"], "clips/s", "higher", f"direct best ({direct['best']})"
        )
        out["direct_best_short_throughput"] = _figure(
            direct.get("best_short_throughput"),
            "clips/s",
            "higher",
            f"direct best ({direct.get('best_short')}), the engine's windows and decode",
        )
        out["faster_whisper_direct_throughput"] = _figure(
            direct.get("faster_whisper_best_throughput"),
            "clips/s",
            "higher",
            f"faster-whisper direct ({direct.get('faster_whisper_best')})",
        )
    if floor := _ok(results, "floor"):
        for name, figures in floor["groups"].items():
            out[f"floor_{name}_p50_s"] = _figure(
                figures["floor_s"]["p50"], "s", "lower", f"floor, {name} real clips, p50"
            )
    if engine := _ok(results, "engine"):
        out["engine_throughput"] = _figure(
            engine["best_throughput"], "clips/s", "higher", "engine throughput, best level"
        )
        out["engine_vs_faster_whisper"] = _figure(
            engine.get("vs_faster_whisper"), "ratio", "higher", "engine / faster-whisper direct"
        )
        if budget := engine.get("goal_budget"):
            out["engine_encode_allowed_ms"] = _figure(
                budget["encode_allowed_ms"],
                "ms",
                "higher",
                f"encode a call may take for {budget['goal']:g}x faster-whisper direct",
            )
        out["engine_c2_vs_c1"] = _figure(
            engine.get("c2_vs_c1"), "ratio", "higher", "engine throughput at 2 calls / at 1"
        )
        out["engine_vs_direct_best"] = _figure(
            engine.get("vs_direct_best"), "ratio", "higher", "engine / direct best throughput"
        )
        out["engine_vs_direct_best_short"] = _figure(
            engine.get("vs_direct_best_short"),
            "ratio",
            "higher",
            "engine / direct best with the engine's windows and decode",
        )
        for name, stats in engine.get("group_latency_s", {}).items():
            out[f"engine_latency_{name}_c1_p50_s"] = _figure(
                stats["p50"], "s", "lower", f"engine p50 at concurrency 1, {name} real clips"
            )
            out[f"engine_vs_floor_{name}"] = _figure(
                engine.get("vs_floor", {}).get(name),
                "ratio",
                "lower",
                f"engine p50 / floor, {name} real clips",
            )
        for label in ("1s", "5s", "15s"):
            out[f"engine_latency_{label}_p50_s"] = _figure(
                engine["latency_s"][label]["p50"], "s", "lower", f"engine latency {label}, p50"
            )
            out[f"engine_overhead_{label}_p50_ms"] = _figure(
                engine["overhead_ms"][label]["p50"], "ms", "lower", f"API overhead {label}, p50"
            )
        top = engine["sweep"][-1]
        out["engine_p95_at_max_concurrency_s"] = _figure(
            top["latency_s"]["p95"], "s", "lower", f"engine p95 at concurrency {top['concurrency']}"
        )
    if idle := _ok(results, "idle"):
        out["idle_rss_mib"] = _figure(
            idle["idle_rss_mib"], "MiB", "lower", "idle engine RSS, workers let go"
        )
        out["idle_grant_to_warm_s"] = _figure(
            idle["grant_to_warm_s"]["p50"], "s", "lower", "idle: grant to warm, p50"
        )
        out["idle_first_vs_warm"] = _figure(
            idle["first_vs_warm"], "ratio", "lower", "idle: first call after warm-up / warm"
        )
    if cold := _ok(results, "cold"):
        out["start_to_ready_s"] = _figure(
            cold["start_to_ready_s"]["p50"], "s", "lower", "serve start to ready, p50"
        )
        out["first_call_s"] = _figure(
            cold["first_call_s"]["p50"], "s", "lower", "first call after ready (1 s clip)"
        )
        out["warm_median_s"] = _figure(
            cold["warm_median_s"], "s", "lower", "warm median (1 s clip)"
        )
        out["first_vs_warm"] = _figure(
            cold["first_vs_warm"], "ratio", "lower", "first call / warm median"
        )
    if memory := _ok(results, "memory"):
        out["worker_rss_max_mib"] = _figure(
            memory["worker_rss_max_mib"], "MiB", "lower", "largest worker RSS"
        )
        out["front_rss_mib"] = _figure(memory["front_rss_mib"], "MiB", "lower", "front RSS")
        out["worker_peak_max_mib"] = _figure(
            memory.get("worker_peak_max_mib"), "MiB", "lower", "largest worker peak RSS"
        )
        out["worker_peak_vs_ctranslate2"] = _figure(
            memory.get("peak_vs_ctranslate2"),
            "ratio",
            "lower",
            "largest worker peak / CTranslate2 alone's",
        )
        ranked = memory.get("peaks_vs_ctranslate2")
        out["worst_peak_vs_ctranslate2"] = _figure(
            max(ranked) if ranked else None,
            "ratio",
            "lower",
            "worker peak / CTranslate2 alone's of the same rank, the worst",
        )
    if peer := _ok(results, "peer"):
        out["peer_throughput"] = _figure(
            peer["best_throughput"], "clips/s", "higher", "peer throughput, best level"
        )
        if engine:
            engine_levels = {lv["concurrency"]: lv for lv in engine["sweep"]}
            for level in peer["sweep"]:
                mine = engine_levels.get(level["concurrency"])
                if mine and level["throughput"] > 0:
                    c = level["concurrency"]
                    out[f"engine_vs_peer_c{c}"] = _figure(
                        mine["throughput"] / level["throughput"],
                        "ratio",
                        "higher",
                        f"engine / peer throughput at concurrency {c}",
                    )
                    if c == 1:
                        out["engine_vs_peer_latency_c1"] = _figure(
                            mine["latency_s"]["p50"] / level["latency_s"]["p50"],
                            "ratio",
                            "lower",
                            "engine / peer p50 latency at concurrency 1",
                        )
    if accuracy := _ok(results, "accuracy"):
        for way, label in (("whole", "whole window, beam 5"), ("engine", "engine")):
            figures = accuracy["ways"][way]
            for language, wer in figures["wer"].items():
                out[f"wer_{way}_{language}"] = _figure(
                    wer, "WER", "lower", f"WER {language}, {label}"
                )
        out["guard_decoded_again_rate"] = _figure(
            accuracy["ways"]["engine"]["decoded_again_rate"],
            "share",
            "lower",
            "real clips the guard decoded again",
        )
    if link := _ok(results, "link"):
        out["link_throughput"] = _figure(
            link["best_throughput"], "clips/s", "higher", "direct link throughput, best level"
        )
        out["link_latency_1s_p50_s"] = _figure(
            link["latency_s"]["1s"]["p50"], "s", "lower", "direct link latency 1s, p50"
        )
    if batch := _ok(results, "batch"):
        top = batch["configs"][batch["best"]]
        out["batch_best_throughput"] = _figure(
            top["throughput"]["mix"], "clips/s", "higher", f"best set-up ({batch['best']}), mix"
        )
        out["batch_best_vs_direct_best"] = _figure(
            top.get("vs_direct_best"), "ratio", "higher", "best set-up / direct best"
        )
    if text := _ok(results, "text"):
        for name, source in text["sources"].items():
            out[f"text_added_{name}_p50_ms"] = _figure(
                source["added_p50_ms"], "ms", "lower", f"engine's added latency, {name} source"
            )
    if tune := _ok(results, "tune"):
        out["tune_best_throughput"] = _figure(
            tune["candidates"][tune["best"]]["throughput"],
            "clips/s",
            "higher",
            f"tuned layout ({tune['best']}), kept for serve",
        )
    if gpu := _ok(results, "gpu"):
        out["gpu_throughput"] = _figure(
            gpu["best_throughput"], "clips/s", "higher", "engine on CUDA, best level"
        )
    return {key: value for key, value in out.items() if value is not None}
