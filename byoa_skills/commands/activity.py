"""``byoa-skills activity``: the newest entries of the activity log, filtered, or all of them
exported as JSON lines."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from byoa_skills.commands.common import whole_number
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.database import StoreError

EXIT_OK, EXIT_USAGE = 0, 2
DEFAULT_LIMIT = 50
COLUMNS = ("time", "kind", "origin", "skill", "decision", "outcome", "measured", "latency", "cost")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``activity [--origin O] [--skill S] [--decision D] [--code C] [--limit N] [--json]
    [--export FILE]`` to the ``byoa-skills`` parser."""
    parser = subparsers.add_parser(
        "activity",
        help="what sites asked for and what the wallet answered (never audio or text)",
        description=(
            "The newest entries of the activity log, oldest first, or every entry written to a "
            "file with --export (JSON lines, for your own records). The log never holds audio "
            "or text. Exit 0, or 2 for a usage error."
        ),
    )
    parser.add_argument("--origin", metavar="O", help="only this site (https://game.example.org)")
    parser.add_argument("--skill", metavar="S", help="only calls of this skill (audio.transcribe)")
    parser.add_argument(
        "--decision", choices=("allowed", "warn", "ask", "blocked"), help="only this decision"
    )
    parser.add_argument("--code", metavar="C", help="only this outcome: ok or a refusal code")
    parser.add_argument(
        "--limit",
        type=whole_number(0),
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"the newest N entries (default {DEFAULT_LIMIT}; 0 for all)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object per line")
    parser.add_argument(
        "--export",
        metavar="FILE",
        type=Path,
        help="write every entry, oldest first, to FILE as JSON lines (mode 0600)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the entries as a table (plain lines when not a terminal) or JSON lines."""
    limit = getattr(args, "limit", DEFAULT_LIMIT)
    if limit is not None and limit < 0:
        print(f"byoa-skills: --limit must be 0 or more, not {limit}", file=sys.stderr)
        return EXIT_USAGE
    log = ActivityLog()
    try:
        if getattr(args, "export", None) is not None:
            count = log.export(args.export)
            print(f"byoa-skills: {count} entries written to {args.export}", file=sys.stderr)
            return EXIT_OK
        entries = log.query(
            origin=getattr(args, "origin", None),
            skill=getattr(args, "skill", None),
            decision=getattr(args, "decision", None),
            code=getattr(args, "code", None),
            limit=limit or None,
        )[::-1]
    except (ValueError, OSError, StoreError) as error:
        print(f"byoa-skills: {error}", file=sys.stderr)
        return EXIT_USAGE
    if getattr(args, "json", False):
        for entry in entries:
            print(json.dumps(entry, separators=(",", ":")))
        return EXIT_OK
    rows = [describe(entry) for entry in entries]
    if not sys.stdout.isatty():
        for row in rows:
            print("\t".join(row))
        return EXIT_OK
    _print_table(rows)
    return EXIT_OK


def describe(entry: dict[str, Any]) -> tuple[str, ...]:
    """The entry's cells, in the order of ``COLUMNS``; ``-`` where it has no value."""
    measured = "-"
    if entry.get("clipSeconds") is not None:
        measured = f"{_number(entry['clipSeconds'])} s"
    elif entry.get("textChars") is not None:
        measured = f"{_number(entry['textChars'])} chars"
    latency = "-" if entry.get("latencyMs") is None else f"{_number(entry['latencyMs'])} ms"
    plain = [_text(entry.get(key)) for key in COLUMNS[:6]]
    return (*plain, measured, latency, _text(entry.get("cost")))


def _print_table(rows: list[tuple[str, ...]]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    if not rows:
        print("No activity yet.")
        return
    table = Table(title="activity")
    for column in COLUMNS:
        table.add_column(column, justify="right" if column in ("latency", "cost") else "left")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # Text: values are never read as markup
    Console().print(table)


def _text(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return _number(value)
    return str(value)


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
