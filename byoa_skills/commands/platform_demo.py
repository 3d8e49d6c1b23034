"""``byoa-skills platform-demo``: run the reference platform of BYOAg pairing."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from byoa_skills.commands.common import configure_logging
from byoa_skills.demos.platform import (
    CODE_MODE,
    CONFIRMATION_MODE,
    DEMO_ACCOUNT,
    DemoPlatform,
    start_platform,
)
from byoa_skills.demos.platform.platform import Pending

DEFAULT_PORT = 8790
MODES = {"code": CODE_MODE, "confirm": CONFIRMATION_MODE}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``platform-demo`` to the ``byoa-skills`` parser."""
    demo = subparsers.add_parser(
        "platform-demo",
        help="run the reference platform of BYOAg pairing, to pair a wallet with",
        description=(
            "Serve a platform with one account (demo): its signed descriptor at "
            "/.well-known/byoag.json, its JWKS, pairing, status and revocation endpoints, "
            "and the protected /api/whoami. It prints a one-time pairing code for the demo "
            "account and how to make more (and, with --mode confirm, how to approve an "
            "agent). Its issuer is http://localhost:PORT: pair with it with "
            "BYOA_WALLET_DEV_LOCAL=1 byoa-skills pair localhost:PORT."
        ),
    )
    demo.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port on localhost (default {DEFAULT_PORT}; 0: any free port)",
    )
    demo.add_argument(
        "--mode",
        choices=tuple(MODES),
        default="code",
        help="code: the code is consent; confirm: the account holder approves "
        "the agent after the code is redeemed (default code)",
    )
    demo.add_argument(
        "--issuer",
        metavar="URL",
        help="the issuer, when a TLS proxy serves it (default http://localhost:PORT)",
    )
    demo.add_argument(
        "--log-level",
        default="warning",
        choices=("debug", "info", "warning", "error"),
        help="log lines on stderr at this level and above (default warning)",
    )
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or Ctrl-C; 0 after a clean stop, 1 when it cannot listen."""
    configure_logging(args.log_level)
    try:
        asyncio.run(serve(args.port, MODES[args.mode], args.issuer))
    except OSError as error:
        print(f"byoa-skills platform-demo: cannot listen: {error}", file=sys.stderr)
        return 1
    return 0


async def serve(port: int, mode: str, issuer: str | None) -> None:
    """Run the platform until SIGTERM or SIGINT."""
    runner, platform = await start_platform(port=port, mode=mode, issuer=issuer)
    session = platform.sign_in(DEMO_ACCOUNT)
    platform.on_pending = lambda pairing_id, entry: _print_pending(
        platform, session, pairing_id, entry
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    name = platform.issuer.split("://", 1)[1]
    code = platform.new_code(DEMO_ACCOUNT)
    auth = f"-H 'Authorization: Bearer {session}'"
    print(
        f"BYOAg reference platform: {platform.issuer} (mode {mode})\n"
        f"  pair:      BYOA_WALLET_DEV_LOCAL=1 byoa-skills pair {name}\n"
        f"  code:      {code}  (account {DEMO_ACCOUNT}, one use, "
        f"{int(platform.codes.lifetime // 60)} minutes)\n"
        f"  new code:  curl -s -X POST {auth} {platform.url('/account/pairing-codes')}\n"
        f"  protected: {platform.url('/api/whoami')} (DPoP-bound credential only)",
        file=sys.stderr,
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def _print_pending(platform: DemoPlatform, session: str, pairing_id: str, entry: Pending) -> None:
    url = platform.url(f"/account/pending/{pairing_id}/approve")
    print(
        f"agent {entry.agent_name or entry.agent_id[:12]!r} asks to pair with account "
        f"{entry.account} ({', '.join(entry.scope)}). Approve:\n"
        f"  curl -s -X POST -H 'Authorization: Bearer {session}' {url}",
        file=sys.stderr,
        flush=True,
    )
