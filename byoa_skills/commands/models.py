"""``byoa-skills models``: list the catalog, pull a model into the cache, verify cached models.

Exit status: 0 when all went well, 1 when a model is missing or damaged (or cannot be
assembled), 2 for a usage error (including an unknown model name). Progress bars go to
stderr, results to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from byoa_skills.models.cache import cache_status, models_dir, pull_model, verify_model
from byoa_skills.models.catalog import DEFAULT_MODEL, ModelSpec, get_model, list_models
from byoa_skills.models.errors import ModelError
from byoa_skills.models.progress import Progress, ProgressFn
from byoa_skills.models.sources import find_sources

#: Error codes that mean the command line was wrong rather than the model.
_USAGE_CODES = frozenset({"unknown-model"})


def add_models_parser(subparsers: Any) -> None:
    """Add the ``models`` command (with ``list``, ``pull NAME``, ``verify [NAME]``) to
    ``subparsers`` (what ``ArgumentParser.add_subparsers()`` returned). Run the parsed
    arguments with :func:`run_models`."""
    parser = subparsers.add_parser(
        "models",
        help="list, pull and verify speech models",
        description="List the known speech models, pull one into the cache, verify the cache.",
    )
    _add_commands(parser)
    parser.set_defaults(run=run_models)


def run_models(args: argparse.Namespace) -> int:
    """Run a parsed ``models`` command; return the exit status (0 ok, 1 a model missing or
    damaged, 2 usage)."""
    command = getattr(args, "models_command", None)
    if command is None:
        args.models_parser.print_help(sys.stderr)
        return 2
    try:
        if command == "list":
            return _list(args)
        if command == "pull":
            return _pull(args)
        return _verify(args)
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2 if exc.code in _USAGE_CODES else 1


def _add_commands(parser: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="the models folder (default: $BYOA_SKILLS_MODELS, else the user cache's models)",
    )
    sub = parser.add_subparsers(dest="models_command", metavar="COMMAND")
    p_list = sub.add_parser("list", parents=[common], help="show the catalog and the cache")
    p_list.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p_pull = sub.add_parser(
        "pull", parents=[common], help="assemble a model into the cache from a source"
    )
    p_pull.add_argument("name", help="the model's name, e.g. base or tiny.en")
    p_pull.add_argument(
        "--from",
        dest="local_dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="take the model's files from this folder only",
    )
    p_pull.add_argument(
        "--download",
        action="store_true",
        help="allow a download from the hub when no local source has the model",
    )
    p_pull.add_argument(
        "--force", action="store_true", help="assemble again even if the cached copy looks whole"
    )
    p_verify = sub.add_parser(
        "verify",
        parents=[common],
        help="re-hash cached models (one, or every cached one) against the catalog",
    )
    p_verify.add_argument("name", nargs="?", default=None, help="the model's name (default: all)")
    parser.set_defaults(models_parser=parser)


def _list(args: argparse.Namespace) -> int:
    rows = [_describe(spec, args.cache_dir) for spec in list_models()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        for row in rows:
            print(
                f"{row['name']:<10} {len(row['languages']):>3} languages "
                f"{_mb(row['size']):>10}  {row['cache']:<8} {', '.join(row['sources']) or '-'}"
            )
        return 0
    table = Table(title=f"models in {models_dir(args.cache_dir)}")
    for column in ("name", "languages", "size", "cache", "sources"):
        table.add_column(column, justify="right" if column in ("languages", "size") else "left")
    for row in rows:
        name = row["name"] + (" (default)" if row["name"] == DEFAULT_MODEL else "")
        languages = row["languages"]
        shown = str(len(languages)) if len(languages) > 1 else f"1 ({languages[0]})"
        table.add_row(name, shown, _mb(row["size"]), row["cache"], ", ".join(row["sources"]) or "-")
    Console().print(table)
    return 0


def _describe(spec: ModelSpec, cache_dir: Path | None) -> dict[str, Any]:
    status = cache_status(spec.name, cache_dir=cache_dir)
    sources = []
    for source in find_sources(spec, allow_download=True):
        if source.problem(spec) is None:
            label = "hub (--download)" if source.kind == "hub" else source.kind
            if label not in sources:
                sources.append(label)
    return {
        "name": spec.name,
        "description": spec.description,
        "languages": list(spec.languages),
        "size": spec.size,
        "cache": status.state,
        "path": str(status.path),
        "problems": list(status.problems),
        "sources": sources,
    }


def _pull(args: argparse.Namespace) -> int:
    get_model(args.name)
    with progress_bar() as bar:
        result = pull_model(
            args.name,
            cache_dir=args.cache_dir,
            progress=bar,
            local_dir=args.local_dir,
            allow_download=args.download,
            force=args.force,
        )
    if result.assembled:
        print(f"{result.name}: ready at {result.path} (assembled from {result.source})")
    else:
        print(f"{result.name}: ready at {result.path} (already cached; sizes checked)")
    return 0


def _verify(args: argparse.Namespace) -> int:
    if args.name is not None:
        names = [get_model(args.name).name]
    else:
        names = [
            s.name
            for s in list_models()
            if cache_status(s.name, cache_dir=args.cache_dir).state != "absent"
        ]
        if not names:
            print(
                f"error: no model is cached in {models_dir(args.cache_dir)}; "
                f"get one with: byoa-skills models pull {DEFAULT_MODEL}",
                file=sys.stderr,
            )
            return 1
    failed = 0
    for name in names:
        try:
            with progress_bar() as bar:
                path = verify_model(name, cache_dir=args.cache_dir, progress=bar)
        except ModelError as exc:
            if exc.code in _USAGE_CODES:
                raise
            print(f"{name}: {exc}")
            failed += 1
            continue
        print(f"{name}: ok ({_mb(get_model(name).size)} checked at {path})")
    return 1 if failed else 0


@contextmanager
def progress_bar() -> Iterator[ProgressFn | None]:
    """A progress callback that draws rich bars on stderr when it is a terminal (``None``
    otherwise, or when rich is missing)."""
    try:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )
        from rich.progress import Progress as RichProgress
    except ImportError:
        yield None
        return
    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    bars = RichProgress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    tasks: dict[tuple[str, str], Any] = {}
    verbs = {"assemble": "assembling", "verify": "verifying"}

    def report(event: Progress) -> None:
        if event.phase == "wait":
            console.print(f"waiting for another process to finish {event.model}...")
            return
        if event.phase == "download":
            console.print(f"downloading {event.model} from the hub...")
            return
        if event.phase not in verbs:
            return
        key = (event.model, event.phase)
        if key not in tasks:
            tasks[key] = bars.add_task(f"{verbs[event.phase]} {event.model}", total=event.total)
        bars.update(tasks[key], completed=event.done)

    with bars:
        yield report


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"
