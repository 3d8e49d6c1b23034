"""``byoa-skills link check LINK``: would the wallet take this ``bringyourownagent://`` link?"""

from __future__ import annotations

import argparse
import json
import sys

from byoa_skills.directlink.check import MAX_LINK_CHARS, check_link

EXIT_VALID, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``link check`` to the ``byoa-skills`` parser."""
    link = subparsers.add_parser("link", help="check bringyourownagent:// links")
    link_commands = link.add_subparsers(dest="link_command", metavar="COMMAND", required=True)
    check = link_commands.add_parser(
        "check",
        help="check a bringyourownagent://connect link as the wallet does before it asks you",
        description=(
            "Check LINK exactly as the wallet checks a link before it shows anything; nothing "
            "is contacted. Exit 0 when the link is valid, 1 when it is refused, 2 for a usage "
            "error. LINK - reads the link from standard input."
        ),
    )
    check.add_argument("link", metavar="LINK")
    check.add_argument(
        "--json", action="store_true", help="print the verdict as JSON (with the session code)"
    )
    check.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check the link, print the verdict, and return the exit status."""
    link = args.link
    if link == "-":
        try:
            link = sys.stdin.read(MAX_LINK_CHARS + 2).removesuffix("\n").removesuffix("\r")
        except (OSError, UnicodeDecodeError) as error:
            print(f"byoa-skills: cannot read the link: {error}", file=sys.stderr)
            return EXIT_USAGE
    result = check_link(link)
    if args.json:
        print(json.dumps(result.to_json()), flush=True)
    elif result.ok:
        skills = ", ".join(result.manifest["skills"]) if result.manifest else ""
        print(
            f"ok: host {result.host}, skills {skills}, "
            f"session code of {len(result.session or '')} characters",
            flush=True,
        )
    else:
        print(f"{result.code}: {result.message}", flush=True)
    return EXIT_VALID if result.ok else EXIT_INVALID
