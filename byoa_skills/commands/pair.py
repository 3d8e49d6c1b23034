"""``byoa-skills pair DOMAIN``: pair this wallet with a platform account (BYOAg 0.1)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from byoa_skills.byoag.code_input import (
    MODEL_VISIBLE_NOTICE,
    HeldCodes,
    clean_code,
    read_code,
)
from byoa_skills.byoag.connector import Waiting, pair
from byoa_skills.byoag.errors import PAIRING_CODE_INVALID, ByoagError
from byoa_skills.byoag.hostname import PlatformHost, check_platform_host
from byoa_skills.directlink.intake import dev_local_enabled
from byoa_skills.skills import KNOWN_SKILLS

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``pair`` to the ``byoa-skills`` parser."""
    command = subparsers.add_parser(
        "pair",
        help="pair with a platform account (BYOAg): its host name, then its one-time code",
        description=(
            "Pair this wallet with your account on a platform. Start pairing on the platform "
            "first: it shows a one-time code. Give the platform's exact host name (e.g. "
            "platform.example: no https://, path or port), then type the code at the prompt; "
            "it is not shown, and it is never a command-line argument. The wallet checks the "
            "platform's signed descriptor, makes new keys for this platform only, and keeps "
            "the registration (see: byoa-skills pairings list). Loopback development "
            "(BYOA_WALLET_DEV_LOCAL=1) also takes localhost:PORT over plain HTTP. "
            "Exit 0 paired, 1 refused (the code and why on stderr), 2 usage error."
        ),
    )
    command.add_argument("domain", metavar="DOMAIN", help="the platform's host name")
    source = command.add_mutually_exclusive_group()
    source.add_argument(
        "--hold-code",
        action="store_true",
        help="only take the code at the prompt and print a single-use reference to it, valid "
        "for 10 minutes, for a client that can pass only tool arguments",
    )
    source.add_argument(
        "--code-ref",
        metavar="REF",
        help="pair with the code held under REF (from --hold-code for the same DOMAIN)",
    )
    source.add_argument(
        "--code-stdin",
        action="store_true",
        help="read the plain code from standard input, for a client that can pass nothing "
        "else; the code may then be visible to a model",
    )
    command.add_argument(
        "--scope",
        action="append",
        choices=KNOWN_SKILLS,
        metavar="SKILL",
        help="a skill the platform may use; repeat it for more (default: "
        f"{', '.join(KNOWN_SKILLS)})",
    )
    command.add_argument("--json", action="store_true", help="print the registration as JSON")
    command.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Pair; see the command's description for the exit status."""
    try:
        platform = check_platform_host(args.domain, dev_local=dev_local_enabled())
    except ValueError as error:
        print(f"byoa-skills pair: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.hold_code:
            print(HeldCodes().hold(platform.name, read_code()))
            return EXIT_OK
        code = _code(args, platform)
        registration = asyncio.run(
            pair(platform, code, scope=args.scope or KNOWN_SKILLS, on_waiting=_waiting)
        )
    except ByoagError as error:
        print(f"byoa-skills pair: {error.code}: {error.message}", file=sys.stderr)
        return EXIT_REFUSED
    except (EOFError, KeyboardInterrupt):
        print("byoa-skills pair: no code was given", file=sys.stderr)
        return EXIT_REFUSED
    if args.json:
        print(json.dumps(registration.shown(), indent=2))
    else:
        print(
            f"paired with {registration.platform} ({registration.mode}): the platform may "
            f"use {', '.join(registration.scope)}"
        )
    return EXIT_OK


def _code(args: argparse.Namespace, platform: PlatformHost) -> str:
    if args.code_ref is not None:
        return HeldCodes().take(args.code_ref, platform.name)
    if args.code_stdin:
        print(f"byoa-skills pair: {MODEL_VISIBLE_NOTICE}", file=sys.stderr)
        text = sys.stdin.readline()
    else:
        return _typed()
    try:
        return clean_code(text)
    except ValueError as error:
        raise ByoagError(PAIRING_CODE_INVALID, str(error)) from None


def _typed() -> str:
    try:
        return read_code()
    except ValueError as error:
        raise ByoagError(PAIRING_CODE_INVALID, str(error)) from None


def _waiting(waiting: Waiting) -> None:
    print(
        f"byoa-skills pair: waiting for you to confirm this agent on {waiting.platform}",
        file=sys.stderr,
        flush=True,
    )
