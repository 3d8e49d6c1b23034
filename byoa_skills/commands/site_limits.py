"""``byoa-skills sites limits ORIGIN ...``: make a site's live grants stricter from a terminal,
as on the wallet page's Sites view, through the running engine's local API; with no engine
running, on the store (the engine reads it when it starts)."""

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
from byoa_skills.consent.site_changes import SiteChanges, store_shim
from byoa_skills.store.errors import StoreError
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim.grants import GrantRefusal
from byoa_skills.wallet_shim.visitor_choices import ChoiceRefusal, read_choices

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2
#: Each option, the limit it sets and its type.
LIMIT_OPTIONS: tuple[tuple[str, str, type], ...] = (
    ("--max-calls-per-minute", "maxCallsPerMinute", int),
    ("--max-parallel-calls", "maxParallelCalls", int),
    ("--max-clip-seconds", "maxClipSeconds", float),
    ("--max-text-chars", "maxTextChars", int),
    ("--max-answer-tokens", "maxAnswerTokens", int),
    ("--max-call-seconds", "maxCallSeconds", float),
)


def add_limits_parser(actions: argparse._SubParsersAction) -> None:
    """Add ``limits`` to the ``sites`` subcommands."""
    limits = actions.add_parser(
        "limits",
        help="make a site's limits stricter (budget, rate, parallel calls, sizes, expiry)",
        description=(
            "Set limits for every live grant of a site, through the running engine (serve): "
            "each may only be stricter than the site's manifest states (or, where it states "
            "none, than the wallet's own); a wider value is refused with its code and changes "
            "nothing. 'none' takes a limit back to the manifest's. The new values bind at "
            "once for new calls, survive a restart, and the site is told. With no engine "
            "running they are written to the store, and the engine reads them when it "
            "starts. Exit 0 changed, 1 refused (or no live grant), 2 usage error."
        ),
    )
    limits.add_argument("origin", metavar="ORIGIN", help="e.g. https://game.example.org")
    for option, name, kind in LIMIT_OPTIONS:
        limits.add_argument(
            option,
            dest=name,
            type=_value(kind),
            metavar="N|none",
            help=f"{name} (a number, or none)",
        )
    limits.add_argument("--budget", help="the budget per session, e.g. '0.10 USD'")
    limits.add_argument(
        "--expires-in-minutes", type=float, metavar="M", help="end the grants sooner: in M minutes"
    )
    limits.add_argument(
        "--models",
        metavar="CODES",
        help="the model codes to keep, comma-separated (e.g. m1): the others are unticked",
    )
    add_finding_options(limits)
    limits.add_argument("--json", action="store_true", help="print the engine's JSON answer")
    limits.set_defaults(run=run_limits)


def run_limits(args: argparse.Namespace) -> int:
    """Send the choices to the running engine and say what it answered."""
    choices: dict[str, Any] = {"limits": {}}
    for _, name, _kind in LIMIT_OPTIONS:
        value = getattr(args, name)
        if value is not None:
            choices["limits"][name] = None if value == "none" else value
    if args.budget is not None:
        choices["budget"] = args.budget
    if args.expires_in_minutes is not None:
        choices["expiresInMinutes"] = args.expires_in_minutes
    if args.models is not None:
        choices["models"] = [code.strip() for code in args.models.split(",") if code.strip()]
    if choices == {"limits": {}}:
        print("byoa-skills sites limits: name at least one limit to set", file=sys.stderr)
        return EXIT_USAGE
    where = find_running_engine(args.port, "sites limits")
    if where.state == "unreachable":
        print(f"byoa-skills sites limits: {where.message}: nothing changed", file=sys.stderr)
        return EXIT_NOT_TOLD
    if where.running:
        answer = asyncio.run(_send(str(where.url), api_token(args.token), args.origin, choices))
        if answer is None:
            print(f"byoa-skills sites limits: {where.message} did not answer", file=sys.stderr)
            return EXIT_NOT_TOLD
    else:  # no engine runs: the same owner, on the store (read when an engine starts)
        answer = in_store(args.origin, choices)
        if answer.get("ok") and not args.json:
            print(
                "no engine running: saved; the site sees it when it next connects", file=sys.stderr
            )
    if args.json:
        print(json.dumps(answer, indent=2))
    if not answer.get("ok"):
        if not args.json:
            print(f"refused: {answer.get('code')}: {answer.get('message')}", file=sys.stderr)
            for problem in answer.get("errors") or []:
                print(
                    f"  {problem.get('code')} at {problem.get('path')}: {problem.get('message')}",
                    file=sys.stderr,
                )
        return EXIT_REFUSED
    if not args.json:
        for grant in answer["grants"]:
            limits = ", ".join(f"{k} {v}" for k, v in sorted(grant["limits"].items()))
            print(f"{grant['grantId'][:8]}…: {limits}")
    return EXIT_OK


def in_store(origin: str, choices: dict[str, Any], sites: SiteStore | None = None) -> Any:
    """The choices made on the store alone, as the engine's route answers them: every live
    grant the store keeps for ``origin`` narrowed, and the choices kept for its next grant;
    written before this returns."""
    sites = sites or SiteStore()
    try:
        summaries = SiteChanges(store_shim(sites)).limits(origin, read_choices(choices))
    except (ChoiceRefusal, GrantRefusal) as refused:
        return {
            "ok": False,
            "code": refused.code,
            "message": refused.message,
            "errors": getattr(refused, "problems", []),
        }
    except StoreError as error:
        return {"ok": False, "code": error.code, "message": str(error)[:200]}
    finally:
        sites.database.flush()
    if not summaries:
        return {"ok": False, "code": "no-live-grant", "message": "the site holds no live grant"}
    return {"ok": True, "grants": summaries}


def _value(kind: type) -> Any:
    def parse(text: str) -> Any:
        if text.strip().lower() == "none":
            return "none"
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None

    return parse


async def _send(url: str, token: str, origin: str, choices: dict[str, Any]) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        try:
            async with session.post(
                f"{url}/v1/sites/limits",
                headers=headers,
                json={"origin": origin, "choices": choices},
            ) as response:
                return await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
