"""``byoa-skills native-host``: the native messaging host Chromium starts for the extension
(through the wrapper ``byoa-skills extension install`` writes); not for a terminal."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from byoa_skills.commands.serve import DEFAULT_PORT
from byoa_skills.extension.host import EngineStarter, NativeHost
from byoa_skills.serve.engine_record import locate_engine
from byoa_skills.serve.token import TOKEN_ENV, UnsafePathError, load_or_create_token
from byoa_skills.store import paths

#: Where the output of an engine the host starts goes, in the user's data folder.
ENGINE_LOG = "engine-from-native-host.log"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``native-host`` to the ``byoa-skills`` parser."""
    command = subparsers.add_parser(
        "native-host",
        help="the native messaging host the browser extension talks to (started by the browser)",
        description=(
            "Speak Chromium's native messaging on stdin and stdout (a 32-bit length in the "
            "machine's byte order, then UTF-8 JSON) and relay each message of the extension to "
            "the running engine's local API. For a request it starts the engine when none "
            "answers and waits until its models are warm. It writes nothing else to stdout; "
            "its log goes to stderr. Exit 0 when the browser closes the pipe, 1 after a "
            "message it cannot read."
        ),
    )
    command.add_argument("--port", type=int, default=DEFAULT_PORT, help="the engine's port")
    command.add_argument(
        "--no-start",
        action="store_true",
        help="never start an engine: with none running, every request gets null",
    )
    command.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an option for the engine the host starts (repeat for each word)",
    )
    command.add_argument(
        "caller", nargs="*", help=argparse.SUPPRESS
    )  # the browser names the extension (chrome-extension://ID/), and more on some systems
    command.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Relay until the browser is gone; see the command's description for the exit status."""
    stdout = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print can never reach the pipe
    sys.stdout = sys.stderr
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="byoa-native-host %(levelname)s %(message)s"
    )
    token = os.environ.get(TOKEN_ENV)
    if not token:
        try:
            token, _, _ = load_or_create_token()
        except UnsafePathError as error:
            logging.getLogger("byoa_skills.native_host").error(
                "event=host-token-refused error=%r", str(error)
            )
            return 1
    argv = None
    if not args.no_start:
        argv = [
            sys.executable,
            "-m",
            "byoa_skills",
            "serve",
            "--port",
            str(args.port),
            *args.serve_arg,
        ]
    starter = EngineStarter(argv, paths.data_dir() / ENGINE_LOG)
    # the engine this home runs, wherever its record says it listens; else the installed port
    where = asyncio.run(locate_engine())
    url = str(where.url) if where.running else f"http://127.0.0.1:{args.port}"
    logging.getLogger("byoa_skills.native_host").info(
        "event=host-engine url=%s found=%s", url, where.state
    )
    host = NativeHost(url, token, starter)
    try:
        return asyncio.run(host.run(sys.stdin.buffer, stdout))
    except KeyboardInterrupt:
        return 0
    finally:
        stdout.close()
