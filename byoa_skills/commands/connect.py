"""``byoa-skills connect LINK``: a ``bringyourownagent://`` link from a site, checked, shown to
the visitor for consent, and handed to the running engine (or run here if none runs)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import aiohttp

from byoa_skills.commands.running_engine import find_running_engine
from byoa_skills.commands.serve import (
    add_engine_arguments,
    add_retention_arguments,
    api_token,
    run_engine,
)
from byoa_skills.consent.desk import CONSENT_SECONDS
from byoa_skills.directlink.check import LinkCheck, check_link
from byoa_skills.directlink.client import link_origin
from byoa_skills.directlink.intake import ASK, dev_local_enabled
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.link_pairings import RecentCodes
from byoa_skills.store.sites import SiteStore

EXIT_CONNECTED, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2
_ANSWERS = {
    "a": "allow",
    "allow": "allow",
    "d": "decline",
    "decline": "decline",
    "o": "decide-on-my-own",
    "own": "decide-on-my-own",
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``connect`` to the ``byoa-skills`` parser."""
    command = subparsers.add_parser(
        "connect",
        help="take a bringyourownagent:// link from a site",
        description=(
            "Check a bringyourownagent:// link, show the site's request, and ask: Allow, "
            "Decline, or Allow and decide on my own: at the terminal's prompt, or, with no "
            "terminal (a link opened from the browser), on the wallet page the engine opens. "
            "Nothing is contacted before Allow, not even DNS. The link goes to the running "
            "engine (serve), or an engine starts here. Exit 0 connected, 1 refused or "
            "declined, 2 usage error."
        ),
    )
    command.add_argument("link", metavar="LINK")
    decision = command.add_mutually_exclusive_group()
    decision.add_argument("--allow", dest="decision", action="store_const", const="allow")
    decision.add_argument("--decline", dest="decision", action="store_const", const="decline")
    decision.add_argument(
        "--decide-on-my-own",
        dest="decision",
        action="store_const",
        const="decide-on-my-own",
        help="allow, and come back after a drop without asking",
    )
    add_engine_arguments(command)
    add_retention_arguments(command)
    command.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check, ask, hand over; see the command's description for the exit status."""
    check = check_link(args.link, dev_local=dev_local_enabled())
    database = WalletDatabase.default()
    activity = ActivityLog(database)
    if not check.ok:
        return _refuse(activity, None, str(check.code), str(check.message))
    origin = link_origin(check)
    state = SiteStore(database).state(origin)
    if state != "active":
        return _refuse(activity, origin, f"site-{state}", f"you have {state} {origin}")
    if RecentCodes(database).seen(check.session):
        return _refuse(activity, origin, "code-seen", "this link's code was used recently")
    if args.decision or sys.stdin.isatty():
        print(consent_text(check), file=sys.stderr)
        decision = args.decision or _ask()
    else:  # opened from a browser: the consent is shown on the wallet page
        decision = ASK
    if decision == "decline":
        return _refuse(activity, origin, "declined", "declined")
    token = api_token(args.token)
    where = find_running_engine(None, "connect")  # this home's engine, where its record says
    if not where.running:
        where = find_running_engine(args.port, "connect")
    if where.state == "unreachable":
        print(f"byoa-skills connect: {where.message}", file=sys.stderr)
        return EXIT_REFUSED
    handed = None
    if where.running:
        handed = asyncio.run(_hand_over(str(where.url), token, args.link, decision))
    if handed is None:  # no engine runs: this process becomes it
        return run_engine(args, links=[(args.link, decision)])
    print(json.dumps(handed))
    return EXIT_CONNECTED if handed.get("ok") else EXIT_REFUSED


def consent_text(check: LinkCheck) -> str:
    """What the visitor reads before deciding: the site, its purpose, skills and languages,
    limits, privacy class and expected cost."""
    manifest = check.manifest
    purpose = manifest.get("purpose", {})
    lines = [f"{check.host} asks to use your AI:", f"  purpose: {purpose.get('summary', '')}"]
    for skill, entry in manifest.get("skills", {}).items():
        languages = entry.get("languages") if isinstance(entry, dict) else None
        shown = f" ({', '.join(map(str, languages))})" if isinstance(languages, list) else ""
        required = " required" if isinstance(entry, dict) and entry.get("required") else ""
        lines.append(f"  skill: {skill}{shown}{required}")
    limits = purpose.get("limits") or {}
    if limits:
        lines.append("  limits: " + ", ".join(f"{k} {v}" for k, v in limits.items()))
    lines.append(f"  privacy: {manifest.get('privacy')}")
    cost = manifest.get("expectedCost") or {}
    if cost:
        lines.append("  expected cost: " + ", ".join(f"{v} {k}" for k, v in cost.items()))
    return "\n".join(lines)


def _ask() -> str:
    while True:
        try:
            answer = input("Allow, Decline, or allow and decide on my Own? [a/d/o] ")
        except EOFError:
            return "decline"
        if answer.strip().lower() in _ANSWERS:
            return _ANSWERS[answer.strip().lower()]


async def _hand_over(url: str, token: str, link: str, decision: str) -> dict[str, Any] | None:
    """The answer of the engine at ``url`` (found answering) to the link, or None when it
    went away before taking it."""
    headers = {"Authorization": f"Bearer {token}"}
    timeout = aiohttp.ClientTimeout(total=CONSENT_SECONDS + 60)  # the visitor may take 120 s
    body = {"link": link, "decision": decision}
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(f"{url}/v1/links", json=body, headers=headers) as response,
        ):
            return await response.json()
    except aiohttp.ClientConnectionError:  # it went away since it was found
        return None


def _refuse(activity: ActivityLog, origin: str | None, code: str, message: str) -> int:
    entry = {"kind": "link", "outcome": code}
    if origin:
        entry["origin"] = origin
    activity.record(entry)
    print(f"byoa-skills connect: {code}: {message}", file=sys.stderr)
    return EXIT_REFUSED
