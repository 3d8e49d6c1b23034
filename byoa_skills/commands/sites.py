"""``byoa-skills sites``: list the sites, pause, resume, block or forget one, set its limits."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import aiohttp

from byoa_skills.commands.running_engine import (
    EXIT_NOT_TOLD,
    add_finding_options,
    find_running_engine,
)
from byoa_skills.commands.serve import api_token
from byoa_skills.commands.site_limits import add_limits_parser
from byoa_skills.consent.site_changes import SiteChanges, store_shim
from byoa_skills.serve.engine_record import EngineLocation
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
            "The site list. A site is known by its origin (https://game.example.org). A "
            "change goes to the running engine (found by its record in this home, or at "
            "--port), which tells the connected site at once; with no engine running it is "
            "saved, and the site sees it when it next connects. Exit 0 when done, 1 when "
            "there was nothing to do, 2 for a usage error, 3 when an engine runs but could "
            "not be told (nothing changed)."
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
        add_finding_options(action)
    own = actions.add_parser(
        "decide-on-my-own",
        help="let the wallet come back to a site after a drop without asking (on), or not (off)",
    )
    own.add_argument("origin", metavar="ORIGIN", help="e.g. https://game.example.org")
    own.add_argument("setting", choices=("on", "off"))
    add_finding_options(own)
    add_limits_parser(actions)
    sites.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Do the ``sites`` subcommand; 0 done, 1 nothing to do, 2 usage error or unreadable list,
    3 an engine runs but could not be told (nothing changed)."""
    store = SiteStore()
    try:
        if args.sites_command == "list":
            _print_list(store.list(), args.json)
            return EXIT_OK
        origin = normalize_origin(args.origin)
        where = find_running_engine(getattr(args, "port", None), "sites")
        if where.state == "unreachable":
            print(f"byoa-skills sites: {where.message}: nothing changed", file=sys.stderr)
            return EXIT_NOT_TOLD
        if where.running:
            told = asyncio.run(_post(str(where.url), args, _body(args, origin)))
        else:  # no engine runs: the same owner, on the store (read when an engine starts)
            told = _in_store(store, args, origin)
        return _said(args, origin, told, where)
    except (ValueError, SiteListError, OSError) as error:
        print(f"byoa-skills: {error}", file=sys.stderr)
        return EXIT_USAGE


def _setting(args: argparse.Namespace) -> bool | None:
    return args.setting == "on" if args.sites_command == "decide-on-my-own" else None


def _body(args: argparse.Namespace, origin: str) -> dict[str, Any]:
    body: dict[str, Any] = {"action": args.sites_command, "origin": origin}
    if args.sites_command == "decide-on-my-own":
        body["setting"] = _setting(args)
    return body


def _in_store(store: SiteStore, args: argparse.Namespace, origin: str) -> dict[str, Any]:
    """The change made on the store alone (no engine runs), as the engine would answer it;
    written before this returns."""
    changes = SiteChanges(store_shim(store))
    try:
        done = asyncio.run(changes.change(args.sites_command, origin, _setting(args)))
    finally:
        store.database.flush()
    return done.to_json()


async def _post(url: str, args: argparse.Namespace, body: dict[str, Any]) -> Any:
    headers = {"Authorization": f"Bearer {api_token(getattr(args, 'token', None))}"}
    timeout = aiohttp.ClientTimeout(total=30)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(f"{url}/v1/sites/change", json=body, headers=headers) as response,
        ):
            return await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return {"ok": False, "code": "no-answer", "message": "the engine did not answer"}


def _said(
    args: argparse.Namespace, origin: str, answer: dict[str, Any], where: EngineLocation
) -> int:
    """Print what the engine (or the store) did, and who was told; the exit status."""
    if not answer.get("ok"):
        code = answer.get("code")
        print(f"byoa-skills: refused: {code}: {answer.get('message')}", file=sys.stderr)
        if code == "unauthorized":  # an engine runs, with another token: nothing changed
            print(
                f"byoa-skills sites: {where.message} has another token (--token or "
                "$BYOA_SKILLS_TOKEN): nothing changed",
                file=sys.stderr,
            )
        return EXIT_NOT_TOLD if code in ("no-answer", "unauthorized") else EXIT_USAGE
    if args.sites_command == "decide-on-my-own":
        done = f"decide on my own: {args.setting} for {origin}"
        nothing = f"decide on my own is already {args.setting} for {origin}"
    else:
        verb, already = _CHANGES[args.sites_command]
        done, nothing = f"{verb} {origin}", f"{origin} {already}"
    if answer.get("pending"):
        print(f"byoa-skills: in force, not yet written: {answer.get('message')}", file=sys.stderr)
    if not answer.get("changed"):
        print(nothing, file=sys.stderr)
        return EXIT_NOTHING
    print(done)
    if not where.running:
        print("no engine running: saved; the site sees it when it next connects", file=sys.stderr)
    elif answer.get("told"):
        print(f"told the connected site ({where.message})", file=sys.stderr)
    else:
        print(f"in force in {where.message}; the site is not connected now", file=sys.stderr)
    return EXIT_OK


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
