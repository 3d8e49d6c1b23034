"""``byoa-skills``: the command line. It only wires the subcommands together."""

from __future__ import annotations

import argparse
import signal
import sys

from byoa_skills import __version__


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``byoa-skills`` with every subcommand."""
    # imported here, not at the top: a worker process spawned under the ``byoa-skills``
    # script runs the script again, and would otherwise import every subcommand's modules
    from byoa_skills.commands import (
        activity,
        byoag_pairings,
        connect,
        extension,
        link,
        native_host,
        pair,
        platform_demo,
        scheme,
        serve,
        site_demo,
        sites,
        sources,
        transcribe,
        wallet,
        wav_check,
    )
    from byoa_skills.commands.models import add_models_parser

    parser = argparse.ArgumentParser(
        prog="byoa-skills",
        description=(
            "The engine behind a BYOA agent wallet: it checks and runs the skills a site "
            "asks for (audio.transcribe, text.generate) on this computer, within the "
            "visitor's grants."
        ),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    serve.add_parser(commands)
    transcribe.add_parser(commands)
    add_models_parser(commands)
    connect.add_parser(commands)
    link.add_parser(commands)
    scheme.add_parser(commands)
    sites.add_parser(commands)
    sources.add_parser(commands)
    site_demo.add_parser(commands)
    pair.add_parser(commands)
    byoag_pairings.add_parser(commands)
    platform_demo.add_parser(commands)
    activity.add_parser(commands)
    wallet.add_parser(commands)
    extension.add_parser(commands)
    native_host.add_parser(commands)
    wav_check.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``byoa-skills`` with ``argv`` and return its exit status (2 for a usage error, 130
    when Ctrl-C stopped it: one line on stderr, no traceback)."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:  # Ctrl-C: what the command started is stopped on the way out
        print(f"byoa-skills {args.command}: stopped", file=sys.stderr)
        return 128 + signal.SIGINT


if __name__ == "__main__":
    sys.exit(main())
