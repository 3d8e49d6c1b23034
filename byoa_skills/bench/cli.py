"""``byoa-bench``: the command line. It only wires the parts together: settings, the
scenarios, the progress bar, the report, the plots and the comparison."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from byoa_skills.bench import compare, plots, report
from byoa_skills.bench.children import exit_status, signals_stop
from byoa_skills.bench.context import keep_logs, make_home, settings_for
from byoa_skills.bench.progress import RichReporter
from byoa_skills.bench.runner import prepare, resolve_device, run_scenarios
from byoa_skills.bench.scenarios import BY_NAME_ONLY, QUICK, default_names, names
from byoa_skills.judge.prompt import DESIGNS


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(sorted({int(part) for part in text.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text}") from None
    if not levels or levels[0] < 1:
        raise argparse.ArgumentTypeError("levels must be 1 or more")
    return levels


def parser() -> argparse.ArgumentParser:
    """The command's arguments."""
    every = names()
    command = argparse.ArgumentParser(
        prog="byoa-bench",
        description="Measure the engine on this machine: WAV parsing, the runtime called "
        "directly, the engine over its local API, cold start, memory, and a peer server.",
    )
    command.add_argument(
        "scenarios",
        nargs="*",
        metavar="SCENARIO",
        help=f"what to run (default: all but {', '.join(BY_NAME_ONLY)}): {', '.join(every)}; "
        "tune measures the layouts that fit this machine and keeps the best in the user's "
        "config, where serve reads it; soak runs alone (byoa-bench soak --help)",
    )
    command.add_argument(
        "--quick",
        action="store_true",
        help=f"few repeats and calls, a tiny sweep; with no scenario named only {', '.join(QUICK)} "
        "(under 3 minutes on 2 cores; the full run measures the rest)",
    )
    command.add_argument("--model", default="base", help="catalog model name (default base)")
    command.add_argument(
        "--device",
        choices=("cpu", "cuda", "auto"),
        default="cpu",
        help="device of the engine scenarios (gpu always uses cuda)",
    )
    command.add_argument(
        "--out",
        type=Path,
        default=Path("bench-out"),
        help="folder for results.json, report.md, plots and the servers' logs (./bench-out)",
    )
    command.add_argument(
        "--compare",
        type=Path,
        metavar="OLD.json",
        help="print each headline figure's change against an earlier run",
    )
    command.add_argument("--calls", type=int, help="calls per throughput run")
    command.add_argument("--repeats", type=int, help="sequential calls per clip and round")
    command.add_argument(
        "--sweep", type=_levels, metavar="1,2,4", help="concurrency levels (default 1..2 x workers)"
    )
    command.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    command.add_argument(
        "--judge-model",
        metavar="NAME",
        help="the judge scenario's model on llama.cpp: smollm2 (default, the dev extra) or "
        "a judge model of the judge-eval extra (qwen2.5-coder-1.5b, qwen2.5-coder-0.5b)",
    )
    command.add_argument(
        "--judge-design",
        choices=DESIGNS,
        help="the judge scenario's prompt design (default: the judge's own)",
    )
    return command


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; 0 when every chosen scenario ran or was skipped, 1 when one
    failed, 2 on bad arguments, 128 + the signal's number when SIGINT, SIGTERM or SIGHUP
    stopped it. ``byoa-bench soak ...`` runs the soak alone (see
    :mod:`byoa_skills.bench.scenarios.soak`). Every process a run starts ends with it."""
    try:
        with signals_stop():
            return _main(argv)
    except KeyboardInterrupt as stopped:
        said = str(stopped) or "SIGINT"
        print(f"byoa-bench: stopped by {said}; its servers were stopped too", file=sys.stderr)
        return exit_status(stopped)


def _main(argv: Sequence[str] | None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["soak"]:
        from byoa_skills.bench.scenarios import soak

        return soak.main(given[1:])
    args = parser().parse_args(argv)
    console = Console()
    err = Console(stderr=True)
    every = names()
    unknown = [name for name in args.scenarios if name not in every]
    if unknown:
        err.print(f"byoa-bench: unknown scenario {', '.join(unknown)}; choose from {every}")
        return 2
    old = compare.load(args.compare) if args.compare else None
    device = resolve_device(args.device)
    settings = settings_for(
        args.quick,
        args.model,
        device,
        args.calls,
        args.repeats,
        args.sweep,
        args.judge_model,
        args.judge_design,
    )
    home, outer_home = make_home(), os.environ.get("BYOA_SKILLS_HOME")
    try:
        with RichReporter(err) as reporter:
            ctx = prepare(settings, reporter, home)
            results = run_scenarios(ctx, args.scenarios or default_names(args.quick))
    finally:  # its servers are stopped by now: keep their logs, not the model and caches
        keep_logs(home, args.out / "logs")
        shutil.rmtree(home, ignore_errors=True)
        if outer_home is None:
            os.environ.pop("BYOA_SKILLS_HOME", None)
        else:
            os.environ["BYOA_SKILLS_HOME"] = outer_home
    rows = compare.changes(old, results) if old else None
    if rows:
        results["compare"] = compare.markdown(rows)
    json_path, md_path = report.write(results, args.out)
    written = [json_path, md_path]
    if not args.no_plots:
        if plots.available():
            written += plots.write(results, args.out)
        else:
            err.print(
                "byoa-bench: matplotlib is not installed, no plots "
                "(pip install 'byoa-skills[bench]')"
            )
    console.print(report.summary(results))
    for table in report.tables(results):
        console.print(table)
    if rows:
        console.print(compare.table(rows))
    console.print("written: " + ", ".join(str(p) for p in written))
    failed = [n for n, e in results["scenarios"].items() if e["status"] == "failed"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
