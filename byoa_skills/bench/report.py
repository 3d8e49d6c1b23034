"""Writes a run's ``results.json`` and ``report.md``, and builds the summary table."""

from __future__ import annotations

import json
from importlib import import_module
from pathlib import Path
from typing import Any

from rich.table import Table

from byoa_skills.bench.clips import LABELS

#: Scenarios whose module gives ``table_head``, ``table_rows`` and ``summary_line``: their
#: table is in the report and printed beside the headline.
TABLED = ("kernels", "encoder", "judge")
#: Said where a run measured no headline figure (a scenario run by name has its own table).
NO_HEADLINE = "No headline figure in this run: the scenarios' own tables follow."


def _n(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 10000 else f"{value:,.0f}"


def _stats_row(name: str, stats: dict[str, float], scale: float = 1.0, digits: int = 3) -> str:
    cells = [_n(stats[k] * scale, digits) for k in ("min", "p50", "p95", "p99")]
    return f"| {name} | {' | '.join(cells)} | {stats['spread']:.1%} | {stats['n']} |"


STATS_HEAD = "| {0} | min | p50 | p95 | p99 | spread | n |\n|---|---|---|---|---|---|---|"


def _sweep_table(sweep: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| concurrency | clips/s | spread | p50 s | p95 s | p99 s |",
        "|---|---|---|---|---|---|",
    ]
    for level in sweep:
        lat = level["latency_s"]
        lines.append(
            f"| {level['concurrency']} | {_n(level['throughput'])} | "
            f"{level['throughput_spread']:.1%} | {_n(lat['p50'])} | {_n(lat['p95'])} | "
            f"{_n(lat['p99'])} |"
        )
    return lines


def _phase_table(splits: list[dict[str, Any]]) -> list[str]:
    """Where a call's time goes at each concurrency: mean ms per call, and share of the wait."""
    parts = list(splits[0]["ms"]) if splits and splits[0]["ms"] else []
    lines = [
        "| concurrency | wait ms | " + " | ".join(parts) + " |",
        "|---|---|" + "---|" * len(parts),
    ]
    for split in splits:
        cells = " | ".join(
            f"{split['ms'][part]:.0f} ({split['share'][part]:.0%})" for part in parts
        )
        lines.append(f"| {split['concurrency']} | {split['waited_ms']:.0f} | {cells} |")
    return [
        "Where a call's time goes (mean ms per call, share of the wait; the model's phases "
        "are its batch's):",
        "",
        *lines,
    ]


def budget_line(budget: dict[str, float]) -> str:
    """One sentence on a :func:`~byoa_skills.bench.phases.goal_budget`: what the goal allows a
    call, what the calls took, and what that leaves the encode (or that it leaves nothing)."""
    allowed = budget["encode_allowed_ms"]
    reach = (
        f"with the other parts as they are, the encode would have to take at most {allowed:.0f} "
        f"ms (now {budget['encode_ms']:.0f})"
        if allowed > 0
        else "the other parts alone take more: out of the encoder's reach"
    )
    return (
        f"{budget['goal']:g}x faster-whisper direct allows {budget['allowed_ms']:.0f} ms of a "
        f"worker a call at {budget['concurrency']:.0f} calls in flight; the calls took "
        f"{budget['busy_ms']:.0f} (encode {budget['encode_ms']:.0f}, decode "
        f"{budget['decode_ms']:.0f}): {reach}."
    )


def markdown(results: dict[str, Any]) -> str:
    """The report as markdown: machine, headline, then each scenario's tables."""
    machine, settings = results["machine"], results["settings"]
    lines = [
        "# byoa-bench report",
        "",
        f"{results['started']}, {results['seconds']:.0f} s, "
        f"{'quick' if settings['quick'] else 'full'} run, model `{settings['model']}`.",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, "
        f"{_n(machine['memory_mib'] and machine['memory_mib'] / 1024)} GiB, "
        f"CUDA devices: {machine['gpu']['cuda_devices']}. "
        + ", ".join(f"{k} {v}" for k, v in machine["libraries"].items() if v),
        "",
        "## Headline",
        "",
    ]
    if results["headline"]:
        lines += ["| figure | value | unit |", "|---|---|---|"]
    else:
        lines.append(NO_HEADLINE)
    for figure in results["headline"].values():
        lines.append(f"| {figure['label']} | {_n(figure['value'])} | {figure['unit']} |")
    for name, entry in results["scenarios"].items():
        lines += ["", f"## {entry['title']} (`{name}`)", ""]
        if entry["status"] != "ok":
            lines.append(f"{entry['status']}: {entry['reason']}")
            continue
        lines += _scenario_lines(name, entry)
    if "compare" in results:
        lines += ["", "## Against the earlier run", "", results["compare"]]
    return "\n".join(lines) + "\n"


def _scenario_lines(name: str, entry: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if name == "wav":
        lines.append(STATS_HEAD.format("clip, reader (µs)"))
        for label, row in entry["rows"].items():
            for reader, stats in row.items():
                lines.append(_stats_row(f"{label}, {reader}", stats, digits=4))
    elif name == "direct":
        lines += ["| layout | clips/s | spread | p50 s | p95 s |", "|---|---|---|---|---|"]
        for layouts, best, way in (
            ("layouts", "best", ""),
            ("short_layouts", "best_short", ", the engine's windows and decode"),
            ("faster_whisper_layouts", "faster_whisper_best", ", faster-whisper's transcribe"),
        ):
            for key, layout in entry.get(layouts, {}).items():
                mark = " (best)" if key == entry.get(best) else ""
                lat = layout["latency_s"]
                lines.append(
                    f"| {layout['processes']} process x {layout['threads']} thread{way}{mark} | "
                    f"{_n(layout['throughput'])} | {layout['throughput_spread']:.1%} | "
                    f"{_n(lat['p50'])} | {_n(lat['p95'])} |"
                )
    elif name == "floor":
        lines += ["| group | floor p50 s | min s | windows s | tokens |", "|---|---|---|---|---|"]
        for group, figures in entry["groups"].items():
            stats = figures["floor_s"]
            lines.append(
                f"| {group} | {_n(stats['p50'])} | {_n(stats['min'])} | "
                f"{', '.join(f'{w:g}' for w in figures['windows_s'])} | "
                f"{', '.join(str(t) for t in figures['tokens'])} |"
            )
    elif name == "accuracy":
        ways = entry["ways"]
        languages = list(ways["whole"]["wer"])
        lines += [
            "| way | "
            + " | ".join(f"WER {n}" for n in languages)
            + " | WER all | decoded again | seconds |",
            "|---|" + "---|" * (len(languages) + 3),
        ]
        for way, figures in ways.items():
            cells = " | ".join(f"{figures['wer'][n]:.3f}" for n in languages)
            lines.append(
                f"| {way} | {cells} | {figures['wer_all']:.3f} | "
                f"{figures['decoded_again']} ({figures['decoded_again_rate']:.1%}) | "
                f"{figures['seconds']:.1f} |"
            )
        answered = ", ".join(f"{k}: {v}" for k, v in sorted(ways["engine"]["answered_by"].items()))
        lines += [
            "",
            f"{entry['clips']} clips. The engine's answers came from: {answered}. "
            f"Within {entry['goal']:.1%} of the whole window in every language: "
            f"{'yes' if entry['within_goal'] else 'no'}.",
        ]
    elif name in ("engine", "gpu", "peer", "link"):
        lines.append(STATS_HEAD.format("latency by clip (s)"))
        for label, stats in entry["latency_s"].items():
            lines.append(_stats_row(label, stats))
        if entry.get("group_latency_s"):
            lines += ["", STATS_HEAD.format("latency by real clip group, one at a time (s)")]
            for group, stats in entry["group_latency_s"].items():
                ratio = entry.get("vs_floor", {}).get(group)
                floor = f" ({ratio:.2f}x the floor)" if ratio else ""
                lines.append(_stats_row(group + floor, stats))
        if entry.get("group_latency_by_window_s"):
            lines += [
                "",
                "| real clip group | window | calls | p50 (s) | languages |",
                "|---|---|---|---|---|",
            ]
            for group, sides in entry["group_latency_by_window_s"].items():
                for side, figure in sides.items():
                    lines.append(
                        f"| {group} | {'under 30 s' if side == 'short' else 'whole (30 s)'} | "
                        f"{figure['calls']} | {figure['p50']:.3f} | "
                        f"{', '.join(figure['languages'])} |"
                    )
        if "overhead_ms" in entry:
            lines += ["", STATS_HEAD.format("API overhead by clip (ms)")]
            for label, stats in entry["overhead_ms"].items():
                lines.append(_stats_row(label, stats))
        lines += ["", *_sweep_table(entry["sweep"])]
        if entry.get("phase_split"):
            lines += ["", *_phase_table(entry["phase_split"])]
        if entry.get("c2_vs_c1"):
            lines += ["", f"Throughput at 2 calls / at 1 call: {entry['c2_vs_c1']:.2f}."]
        if entry.get("vs_faster_whisper"):
            lines += [
                "",
                f"Best throughput {_n(entry['best_throughput'])} clips/s = "
                f"{entry['vs_faster_whisper']:.2f}x faster-whisper direct "
                f"({_n(entry['faster_whisper_best'])} clips/s).",
            ]
        if budget := entry.get("goal_budget"):
            lines += ["", budget_line(budget)]
        if entry.get("vs_direct_best"):
            lines += [
                "",
                f"Best throughput {_n(entry['best_throughput'])} clips/s = "
                f"{entry['vs_direct_best']:.0%} of direct best "
                f"({_n(entry['direct_best'])} clips/s)"
                + (
                    f", {entry['vs_direct_best_short']:.0%} of direct best with the engine's "
                    f"windows and decode ({_n(entry['direct_best_short'])} clips/s)."
                    if entry.get("vs_direct_best_short")
                    else "."
                ),
            ]
        if name == "peer":
            lines += [
                "",
                f"Start to ready {_n(entry['start_to_ready_s'])} s, "
                f"RSS {_n(entry['rss_mib'])} MiB. Command: `{entry['command']}`",
            ]
    elif name == "cold":
        lines.append(STATS_HEAD.format("seconds"))
        lines.append(_stats_row("serve start to ready", entry["start_to_ready_s"]))
        lines.append(_stats_row("first call (1 s clip)", entry["first_call_s"]))
        lines.append(_stats_row("warm calls (1 s clip)", entry["warm_s"]))
        lines += ["", f"First call / warm median: {entry['first_vs_warm']:.2f}."]
    elif name == "idle":
        lines.append(STATS_HEAD.format("seconds"))
        lines.append(_stats_row("grant to its answer (workers warm)", entry["grant_to_warm_s"]))
        lines.append(_stats_row("first call after the warm-up", entry["first_call_s"]))
        lines += [
            "",
            f"Whole engine RSS: {entry['warm_rss_mib']:.0f} MiB warm, "
            f"{entry['idle_rss_mib']:.0f} MiB with its {entry['workers']} workers let go "
            f"(after {entry['idle_release_s']:g} s idle). First call / warm median: "
            f"{entry['first_vs_warm']:.2f}.",
        ]
    elif name == "batch":
        lines += [
            "| set-up | p50 1 s / 5 s / 15 s (s) | clips/s 1 s / 5 s / 15 s / mix | "
            "mix / direct best |",
            "|---|---|---|---|",
        ]
        for key, figures in entry["configs"].items():
            latency = " / ".join(_n(figures["latency_s"][label]["p50"]) for label in LABELS)
            rates = " / ".join(_n(figures["throughput"][k]) for k in (*LABELS, "mix"))
            ratio = figures.get("vs_direct_best")
            best = " (best)" if key == entry["best"] else ""
            lines.append(
                f"| {key}{best} | {latency} | {rates} | "
                f"{'-' if ratio is None else f'{ratio:.2f}x'} |"
            )
    elif name == "text":
        lines.append(STATS_HEAD.format("source, path (ms)"))
        for source, figures in entry["sources"].items():
            lines.append(_stats_row(f"{source}, direct", figures["direct_ms"]))
            lines.append(_stats_row(f"{source}, through the engine", figures["engine_ms"]))
            lines.append(_stats_row(f"{source}, engine minus direct", figures["added_ms"]))
        lines += [
            "",
            "Added latency, difference of the medians: "
            + ", ".join(
                f"{source} {figures['added_p50_ms']:.2f} ms"
                for source, figures in entry["sources"].items()
            )
            + f" ({entry['max_tokens']} answer tokens).",
        ]
    elif name == "store":
        lines.append(STATS_HEAD.format("the shim's work (ms)"))
        for key, label in (
            ("grant_created_ms", "grant taken"),
            ("call_recorded_ms", "call recorded (event loop)"),
            ("call_committed_ms", "call recorded to committed"),
            ("site_query_ms", "one site's newest 100 entries"),
        ):
            lines.append(_stats_row(label, entry[key]))
        stall = entry["burst_longest_stall_ms"]
        lines += [
            "",
            f"{entry['sites']} sites, {entry['activity_entries']} activity entries "
            f"({entry['database_mib']:.0f} MiB); longest event-loop stall during a burst "
            f"of {entry['burst_calls']} calls: {stall:.1f} ms.",
        ]
    elif name == "longform":
        wer = entry["wer"]
        lines += [
            "| way | wall s | WER vs said |",
            "|---|---|---|",
            f"| engine, {entry['workers']} workers, pieces across the pool | "
            f"{_n(entry['engine_s'])} | {wer['engine']:.1%} |",
            f"| faster-whisper transcribe | {_n(entry['transcribe_s'])} | "
            f"{wer['transcribe']:.1%} |",
            f"| faster-whisper BatchedInferencePipeline | {_n(entry['batched_s'])} | "
            f"{wer['batched']:.1%} |",
            "",
            f"{entry['recording_s']:.0f} s recording; the engine is "
            f"{entry['speedup_vs_faster']:.2f}x the faster direct way; WER engine vs transcribe "
            f"{wer['engine_vs_transcribe']:.1%}. A site's 1 s clip: {_n(entry['site_idle_s'])} s "
            f"idle, {_n(entry['site_during_s'])} s during the long job "
            f"({entry['site_calls_during']} calls).",
        ]
    elif name == "longmemory":
        lines += _longmemory_lines(entry)
    elif name == "tune":
        lines += [
            "| candidate | clips/s, twice the cores in flight | p50 one at a time (s) |",
            "|---|---|---|",
        ]
        for key, figures in entry["candidates"].items():
            best = " (chosen)" if key == entry["best"] else ""
            lines.append(
                f"| {key}{best} | {_n(figures['throughput'])} | "
                f"{_n(figures['latency_c1_s']['p50'])} |"
            )
        lines += ["", f"Kept for `serve` ({entry['model']}) in {entry['kept_in']}."]
    elif name in TABLED:
        scenario = import_module(f"byoa_skills.bench.scenarios.{name}")
        head = scenario.table_head(entry)
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in scenario.table_rows(entry)]
        lines += ["", scenario.summary_line(entry)]
    elif name == "memory":
        workers = ", ".join(f"{v:.0f}" for v in entry["worker_rss_mib"].values())
        lines.append(
            f"Workers: {workers} MiB; front process: {entry['front_rss_mib']:.0f} MiB; "
            f"total {entry['total_rss_mib']:.0f} MiB."
        )
        if entry.get("worker_peak_mib"):
            peaks = ", ".join(f"{v:.0f}" for v in entry["worker_peak_mib"].values())
            runs = entry.get("encoder", "")
            if entry.get("vad"):
                runs += f", VAD on {entry['vad']}"
            lines += ["", f"Workers' peaks ({runs}): {peaks} MiB."]
        lines += _resident_split_line("Workers now", entry)
        if alone := entry.get("ctranslate2_alone"):
            peaks = ", ".join(f"{v:.0f}" for v in alone["worker_peak_mib"].values())
            vad = f" (VAD on {alone['vad']})" if alone.get("vad") else ""
            lines.append(
                f"With CTranslate2's encoder alone{vad}, after the same calls: workers' peaks "
                f"{peaks} MiB; largest peak / CTranslate2 alone's: "
                f"{entry['peak_vs_ctranslate2']:.2f}."
            )
            if ranked := entry.get("peaks_vs_ctranslate2"):
                each = ", ".join(f"{r:.2f}" for r in ranked)
                lines.append(
                    f"Each worker's peak / CTranslate2 alone's of the same rank, largest first: "
                    f"{each}."
                )
            lines += _resident_split_line("CTranslate2 alone's workers now", alone)
    return lines


def _resident_split_line(label: str, entry: dict[str, Any]) -> list[str]:
    """One line of each worker's resident memory now: its own, and mapped files' pages."""
    split = entry.get("worker_resident_mib")
    if not split:
        return []
    each = ", ".join(f"{kinds['anon']:.0f} + {kinds['file']:.0f}" for kinds in split.values())
    return [
        f"{label}, own + mapped files' pages (shared libraries' code, mapped weights): {each} MiB."
    ]


def _longmemory_lines(entry: dict[str, Any]) -> list[str]:
    """The front process's memory for each long recording, then the burst of uploads whose
    clients leave: its peak, its answers and the CPU time spent after they left."""
    lines = ["| recordings | peak growth MiB | kept MiB | wall s |", "|---|---|---|---|"]
    for key, step in entry["steps"].items():
        lines.append(
            f"| {key.replace('_x', ', ')} at once | {_n(step['peak_growth_mib'])} | "
            f"{_n(step['kept_growth_mib'])} | {_n(step['seconds'])} |"
        )
    burst = entry.get("burst")
    if burst:
        answers = ", ".join(f"{outcome}: {count}" for outcome, count in burst["outcomes"].items())
        idle = burst["working_zero_after_s"]
        lines += [
            "",
            f"{burst['uploads']} uploads of {_n(burst['file_mib'])} MiB at once, each "
            f"client gone after {_n(burst['stays_s'])} s: peak growth "
            f"{_n(burst['peak_growth_mib'])} MiB; {answers}; serve used "
            f"{_n(burst['cpu_after_s'])} s of CPU in the {_n(burst['after_s'])} s after "
            f"they left"
            + ("" if idle is None else f" (no recording working {_n(idle)} s after)")
            + ".",
        ]
    return lines


def write(results: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``results.json`` and ``report.md`` into ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "results.json", out / "report.md"
    json_path.write_text(json.dumps(results, indent=2) + "\n")
    md_path.write_text(markdown(results))
    return json_path, md_path


def tables(results: dict[str, Any]) -> list[Table]:
    """The tables a run prints beside its headline: one for each scenario of :data:`TABLED`
    that was measured (the encoder backends', the purpose judge's)."""
    made = []
    for name in TABLED:
        entry = results["scenarios"].get(name, {})
        if entry.get("status") != "ok":
            continue
        scenario = import_module(f"byoa_skills.bench.scenarios.{name}")
        table = Table(title=scenario.TITLE, caption=scenario.summary_line(entry))
        for index, column in enumerate(scenario.table_head(entry)):
            table.add_column(column, justify="left" if index == 0 else "right", no_wrap=index == 0)
        for row in scenario.table_rows(entry):
            table.add_row(*row)
        made.append(table)
    return made


def summary(results: dict[str, Any]) -> Table:
    """The run's headline as a rich table, with each scenario's status."""
    table = Table(
        title=f"byoa-bench: {results['settings']['model']}, {results['machine']['cores']} cores"
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("unit")
    for figure in results["headline"].values():
        table.add_row(figure["label"], _n(figure["value"]), figure["unit"])
    if not results["headline"]:
        table.caption = NO_HEADLINE
    for name, entry in results["scenarios"].items():
        if entry["status"] != "ok":
            table.add_row(f"[dim]{name}", f"[dim]{entry['status']}", f"[dim]{entry['reason']}")
    return table
