"""``byoa-skills pairings``: the platforms this wallet is paired with (BYOAg), and revoking one.

These are BYOAg registrations (``byoa-skills pair``); the sites of the direct link are in
``byoa-skills sites``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from byoa_skills.byoag.connector import revoke
from byoa_skills.byoag.registrations import Registration, RegistrationStore
from byoa_skills.directlink.intake import dev_local_enabled

EXIT_OK, EXIT_NOTHING, EXIT_USAGE = 0, 1, 2


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``pairings list|revoke`` to the ``byoa-skills`` parser."""
    pairings = subparsers.add_parser(
        "pairings",
        help="the platforms you paired with (BYOAg): list, revoke",
        description=(
            "The platform accounts this wallet is paired with through `byoa-skills pair`, "
            "each with the skills it may use. A platform is known by the name it was paired "
            "with (platform.example). Exit 0 when done, 1 when there was nothing to do, "
            "2 for a usage error."
        ),
    )
    actions = pairings.add_subparsers(dest="pairings_command", metavar="COMMAND", required=True)
    listing = actions.add_parser("list", help="every registration with its scope")
    listing.add_argument("--json", action="store_true", help="print a JSON array")
    revoking = actions.add_parser(
        "revoke",
        help="revoke a registration: tell the platform, delete its keys here",
        description=(
            "Tell the platform the registration ends (when it has a revocation endpoint), "
            "then forget the registration and delete its keys here, even when the platform "
            "cannot be told: without this installation's key its credential is of no use."
        ),
    )
    revoking.add_argument("platform", metavar="PLATFORM", help="e.g. platform.example")
    pairings.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Do the ``pairings`` subcommand; 0 done, 1 nothing to do, 2 usage error."""
    store = RegistrationStore()
    try:
        if args.pairings_command == "list":
            _print_list(store.list(), args.json)
            return EXIT_OK
        told = asyncio.run(revoke(args.platform, store=store, dev_local=dev_local_enabled()))
    except OSError as error:
        print(f"byoa-skills pairings: {error}", file=sys.stderr)
        return EXIT_USAGE
    if told is None:
        print(f"{args.platform} is not paired", file=sys.stderr)
        return EXIT_NOTHING
    if told:
        print(f"revoked {args.platform}: the platform confirmed, and the keys here are deleted")
    else:
        print(
            f"revoked {args.platform} here: the keys are deleted; the platform was not told "
            "(no revocation endpoint, or no answer)"
        )
    return EXIT_OK


def _print_list(registrations: list[Registration], as_json: bool) -> None:
    if as_json:
        print(json.dumps([registration.shown() for registration in registrations], indent=2))
        return
    if not sys.stdout.isatty():
        for r in registrations:
            print("\t".join((r.platform, ",".join(r.scope), r.mode, r.paired_at)))
        return
    if not registrations:
        print("No pairings yet: pair with a platform with byoa-skills pair DOMAIN.")
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title="pairings (BYOAg)")
    for column in ("platform", "scope", "mode", "paired", "agent id"):
        table.add_column(column)
    for r in registrations:
        table.add_row(
            Text(r.platform),
            Text(", ".join(r.scope)),
            Text(r.mode),
            Text(r.paired_at),
            Text(r.agent_id[:12] + "…"),
        )
    Console().print(table)
