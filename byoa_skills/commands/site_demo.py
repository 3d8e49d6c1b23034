"""``byoa-skills site-demo``: run the reference site of the direct link (the geography game,
or with ``--mode text`` one question for two models)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from urllib.parse import urlsplit

from byoa_skills.commands.common import configure_logging
from byoa_skills.demos.site import MODES, start_site
from byoa_skills.demos.site.hostile import DEFAULT_CALLS, KINDS

DEFAULT_PORT = 8080
log = logging.getLogger("byoa_skills.demos.site")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``site-demo`` to the ``byoa-skills`` parser."""
    demo = subparsers.add_parser(
        "site-demo",
        help="run the reference site of the direct link: a family geography game",
        description=(
            "Serve the geography game's page and its BYOA server: POST /byoa/code makes a "
            "one-time code and the bringyourownagent:// link, the wallet connects to "
            "/byoa/ws, and POST /byoa/transcribe has it transcribe the page's clip. The link "
            "names wss://PUBLIC-HOST/byoa/ws, or --endpoint; with neither, "
            "ws://localhost:PORT/byoa/ws, which a wallet takes only with its developer "
            "switch (BYOA_WALLET_DEV_LOCAL=1). With --mode text the page asks two models "
            "from different companies one question (POST /byoa/ask) and shows the grant as "
            "the wallet last told it (GET /byoa/grant)."
        ),
    )
    demo.add_argument(
        "--mode",
        choices=MODES,
        default="geo",
        help="geo: the geography game (default); text: one question for two "
        "models from different companies",
    )
    demo.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; localhost: 127.0.0.1 and ::1)",
    )
    demo.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    demo.add_argument(
        "--public-host",
        metavar="NAME",
        help="the public host name the link's wss:// endpoint names",
    )
    demo.add_argument(
        "--endpoint",
        metavar="URL",
        help="the WebSocket URL the link names, e.g. ws://localhost:8080/byoa/ws",
    )
    demo.add_argument(
        "--trust-forwarded",
        action="store_true",
        help="behind a reverse proxy: limit codes per X-Forwarded-For address",
    )
    demo.add_argument(
        "--hostile",
        choices=KINDS,
        metavar="KIND",
        help="attack every wallet that connects, to test it: "
        + ", ".join(KINDS)
        + " (see docs/reliability.md)",
    )
    demo.add_argument(
        "--hostile-calls",
        type=int,
        default=DEFAULT_CALLS,
        metavar="N",
        help=f"how many calls never-reads and floods send (default {DEFAULT_CALLS})",
    )
    demo.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="log lines on stderr at this level and above (default info)",
    )
    demo.set_defaults(run=run)


def endpoint_for(args: argparse.Namespace) -> str | None:
    """The endpoint the link names; None for ws://localhost:PORT/byoa/ws on the bound port.
    Raises ValueError for an unusable --endpoint or --public-host."""
    if args.endpoint is not None:
        parts = urlsplit(args.endpoint)
        if parts.scheme not in ("ws", "wss") or not parts.hostname:
            raise ValueError(f"--endpoint must be a ws:// or wss:// URL, not {args.endpoint!r}")
        return args.endpoint
    if args.public_host is not None:
        name = args.public_host
        if not name or any(ch in name for ch in "/?#@ ") or "://" in name:
            raise ValueError(f"--public-host must be a host name, not {name!r}")
        return f"wss://{name}/byoa/ws"
    return None


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or Ctrl-C; 0 after a clean stop, 2 for a usage error."""
    configure_logging(args.log_level)
    if args.endpoint is not None and args.public_host is not None:
        print("byoa-skills site-demo: give --public-host or --endpoint, not both", file=sys.stderr)
        return 2
    try:
        endpoint = endpoint_for(args)
    except ValueError as error:
        print(f"byoa-skills site-demo: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(
            serve(
                args.host,
                args.port,
                endpoint,
                args.trust_forwarded,
                args.hostile,
                args.hostile_calls,
                args.mode,
            )
        )
    except OSError as error:
        print(f"byoa-skills site-demo: cannot listen: {error}", file=sys.stderr)
        return 1
    return 0


async def serve(
    host: str,
    port: int,
    endpoint: str | None,
    trust_forwarded: bool,
    hostile: str | None = None,
    hostile_calls: int = DEFAULT_CALLS,
    mode: str = "geo",
) -> None:
    """Run the site in ``mode`` until SIGTERM or SIGINT, then say bye to the wallets and
    stop; with ``hostile``, attack every wallet that connects."""
    runner, url, demo = await start_site(
        host=host,
        port=port,
        endpoint=endpoint,
        trust_forwarded=trust_forwarded,
        hostile=hostile,
        hostile_calls=hostile_calls,
        mode=mode,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    endpoint = demo.endpoint
    log.info("event=listening url=%s endpoint=%s", url, endpoint)
    what = "the geography game" if mode == "geo" else "the text mode"
    print(
        f"byoa-skills: {what} is on {url} (the link names {endpoint})", file=sys.stderr, flush=True
    )
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        log.info("event=stopped")
