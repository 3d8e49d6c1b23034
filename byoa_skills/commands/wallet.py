"""``byoa-skills wallet``: open the wallet page of the running engine in the browser."""

from __future__ import annotations

import argparse
import asyncio
import sys

import aiohttp

from byoa_skills.commands.running_engine import add_finding_options, find_running_engine
from byoa_skills.commands.serve import api_token
from byoa_skills.serve.wallet.opener import BROWSER_ENV, open_page

EXIT_OK, EXIT_NO_ENGINE, EXIT_USAGE = 0, 1, 2


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``wallet`` to the ``byoa-skills`` parser."""
    command = subparsers.add_parser(
        "wallet",
        help="open the wallet page: consents, sites, grants, activity, engine, pairings",
        description=(
            "Ask the running engine (serve) for a one-time ticket and open its wallet page in "
            f"the browser (${BROWSER_ENV} names another browser command, or none). The "
            "ticket is good once, for 60 seconds. Exit 0 opened, 1 no engine answers, "
            "2 usage error."
        ),
    )
    command.add_argument(
        "--print",
        dest="print_only",
        action="store_true",
        help="print the page's address (with its ticket) instead of opening a browser",
    )
    add_finding_options(command)
    command.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Get a ticket and open (or print) the page."""
    where = find_running_engine(args.port, "wallet")
    url = asyncio.run(page_url(str(where.url), api_token(args.token))) if where.running else None
    if url is None:
        said = where.message if not where.running else f"{where.message} gave no ticket"
        print(f"byoa-skills wallet: {said}: start `byoa-skills serve` first", file=sys.stderr)
        return EXIT_NO_ENGINE
    if args.print_only:
        print(url)
    else:
        open_page(url)
        print("byoa-skills wallet: the wallet page is opening in your browser", file=sys.stderr)
    return EXIT_OK


async def page_url(engine_url: str, token: str) -> str | None:
    """The wallet page's address with a fresh ticket from the engine at ``engine_url``, or
    None when it does not answer with one."""
    headers = {"Authorization": f"Bearer {token}"}
    timeout = aiohttp.ClientTimeout(total=10)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(f"{engine_url}/v1/wallet/tickets", headers=headers) as got,
        ):
            if got.status != 200:
                return None
            body = await got.json()
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
        return None
    url = body.get("url") if isinstance(body, dict) else None
    return url if isinstance(url, str) else None
