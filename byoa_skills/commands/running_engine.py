"""How a command finds the running engine it talks to: the options and the one lookup
(:func:`~byoa_skills.serve.engine_record.locate_engine`), the same for every command."""

from __future__ import annotations

import argparse
import asyncio
import sys

from byoa_skills.serve.engine_record import EngineLocation, locate_engine
from byoa_skills.serve.token import TOKEN_ENV

#: The exit status of a change that could not reach an engine that runs.
EXIT_NOT_TOLD = 3


def add_finding_options(parser: argparse.ArgumentParser) -> None:
    """``--port`` (overrides the engine's record) and ``--token``."""
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="the engine's port on 127.0.0.1 (default: where the running engine's record in "
        "this home says it listens)",
    )
    parser.add_argument("--token", help=f"the API token (default: ${TOKEN_ENV}, else the file)")


def find_running_engine(port: int | None, command: str) -> EngineLocation:
    """The engine on ``port``, else the one this home's record names; a stale record is
    said on stderr, prefixed with ``command``."""
    where = asyncio.run(locate_engine(port))
    if where.state == "stale":
        print(f"byoa-skills {command}: {where.message}", file=sys.stderr)
    return where
