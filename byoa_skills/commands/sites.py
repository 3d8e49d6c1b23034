"""``byoa-skills sites``: list the sites, pause, resume, block or forget one, set its limits."""

from __future__ import annotations

import argparse
import json
import sys

from byoa_skills.commands.site_limits import add_limits_parser
from byoa_skills.store.sites import SiteEntry, SiteListError, SiteStore, normalize_origin

EXIT_OK, EXIT_NOTHING, EXIT_USAGE = 0, 1, 2

_CHANGES = {
    "pause": ("paused", "is already paused"),
    "resume": ("resumed", "is already active"),
    "block": ("blocked", "is already blocked"),
    "forget": ("forgot", "is not in the site list"),
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``sites list|pause|resume|block|forget|decide-on-my-own`` to the parser."""
    sites = subparsers.add_parser(
        "sites",
        help="the sites that asked for your AI: list, pause, resume, block, forget",
        description=(
            "The site list. A site is known by its origin (https://game.example.org). "
            "Exit 0 when done, 1 when there was nothing to do, 2 for a usage error."
        ),
    )
    actions = sites.add_subparsers(dest="sites_command", metavar="COMMAND", required=True)
    listing = actions.add_parser("list", help="every site with its state")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    helps = {
        "pause": "pause a site: it gets no answer until resumed",
        "resume": "make a paused or blocked site active again",
        "block": "block a site: its requests and links are refused",
        "forget": "remove a site from the list (it is active again)",
    }
    for name, text in helps.items():
        action = actions.add_parser(name, help=text)
        action.add_argument("origin", metavar="ORIGIN", help="e.g. https://game.example.org")
    own = actions.add_parser(
        "decide-on-my-own",
        help="let the wallet come back to a site after a drop without asking (on), or not (off)",
    )
    own.add_argument("origin", metavar="ORIGIN", help="e.g. https://game.example.org")
    own.add_argument("setting", choices=("on", "off"))
    add_limits_parser(actions)
    sites.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Do the ``sites`` subcommand; 0 done, 1 nothing to do, 2 usage error or unreadable list."""
    store = SiteStore()
    try:
        if args.sites_command == "list":
            _print_list(store.list(), args.json)
            return EXIT_OK
        origin = normalize_origin(args.origin)
        if args.sites_command == "decide-on-my-own":
            if store.set_decide_on_my_own(origin, args.setting == "on"):
                print(f"decide on my own: {args.setting} for {origin}")
                return EXIT_OK
            print(f"decide on my own is already {args.setting} for {origin}", file=sys.stderr)
            return EXIT_NOTHING
        done, nothing = _CHANGES[args.sites_command]
        if getattr(store, args.sites_command)(origin):
            print(f"{done} {origin}")
            return EXIT_OK
        print(f"{origin} {nothing}", file=sys.stderr)
        return EXIT_NOTHING
    except (ValueError, SiteListError, OSError) as error:
        print(f"byoa-skills: {error}", file=sys.stderr)
        return EXIT_USAGE


def _print_list(entries: list[SiteEntry], as_json: bool) -> None:
    if as_json:
        print(json.dumps([entry.to_json() for entry in entries], indent=2))
        return
    if not sys.stdout.isatty():
        for entry in entries:
            print("\t".join((entry.origin, entry.state, entry.since, entry.last_seen or "-")))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    if not entries:
        print("No sites yet: a site is listed once it asks for your AI or you pause or block it.")
        return
    table = Table(title="sites")
    for column in ("origin", "state", "since", "first seen", "last seen", "note"):
        table.add_column(column)
    styles = {"active": "green", "paused": "yellow", "blocked": "red"}
    for entry in entries:
        # Text cells: an origin such as http://[::1] must not be read as rich markup.
        table.add_row(
            Text(entry.origin),
            Text(entry.state, style=styles[entry.state]),
            Text(entry.since),
            Text(entry.first_seen or "-"),
            Text(entry.last_seen or "-"),
            Text(entry.note or ""),
        )
    Console().print(table)
