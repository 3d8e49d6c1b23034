"""``byoa-skills extension install | uninstall | show``: the browser extension's native host,
registered for the current user, and where the extension is and how to load it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from byoa_skills.commands.serve import DEFAULT_PORT
from byoa_skills.extension.install import (
    BROWSERS,
    InstallError,
    extension_dir,
    extension_id,
    host_files,
    hosts_dir,
    install,
    uninstall,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
ACTIONS = {
    "install": "write the host's manifest and script",
    "uninstall": "remove them",
    "show": "print the extension's folder, its ID and the host's files",
}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``extension`` and its actions to the ``byoa-skills`` parser."""
    command = subparsers.add_parser(
        "extension",
        help="register the browser extension's native host; show how to load the extension",
        description=(
            "The extension adds window.byoa to pages and talks to the wallet through a native "
            "host that the browser starts. install writes the host's manifest "
            "(org.bringyourownagent.wallet) and the script it starts in the browser's per-user "
            "folder, or in a profile's NativeMessagingHosts/ with --user-data-dir; uninstall "
            "removes them; show prints where everything is. Exit 0 done, 1 failed, 2 usage."
        ),
    )
    actions = command.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, text in ACTIONS.items():
        action = actions.add_parser(name, help=text, description=text)
        action.add_argument(
            "--browser",
            choices=BROWSERS,
            default="chromium",
            help="whose per-user folder (default chromium)",
        )
        action.add_argument(
            "--user-data-dir",
            type=Path,
            metavar="DIR",
            help="a browser profile folder instead of the per-user one",
        )
        if name == "install":
            action.add_argument(
                "--port",
                type=int,
                default=DEFAULT_PORT,
                help=f"the engine's port (default {DEFAULT_PORT})",
            )
            action.add_argument(
                "--no-start",
                action="store_true",
                help="the host never starts an engine (with none running, requests get null)",
            )
            action.add_argument(
                "--serve-arg",
                action="append",
                default=[],
                metavar="ARG",
                help="an option for the engine the host starts, e.g. --serve-arg=--model "
                "--serve-arg=tiny.en (repeat for each word)",
            )
        action.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Do the action; see the command's description for the exit status."""
    try:
        folder = hosts_dir(args.browser, args.user_data_dir)
    except InstallError as error:
        print(f"byoa-skills extension: {error}", file=sys.stderr)
        return EXIT_FAILED
    if args.action == "install":
        try:
            files = install(folder, args.port, not args.no_start, args.serve_arg)
        except OSError as error:
            print(f"byoa-skills extension: cannot write in {folder}: {error}", file=sys.stderr)
            return EXIT_FAILED
        print(f"host manifest: {files.manifest}")
        print(f"host script:   {files.wrapper}")
        print(how_to_load(args.browser))
        return EXIT_OK
    if args.action == "uninstall":
        removed = uninstall(folder)
        for path in removed:
            print(f"removed: {path}")
        if not removed:
            print(f"nothing to remove in {folder}")
        return EXIT_OK
    files = host_files(folder)
    installed = "installed" if files.manifest.exists() else "not installed"
    print(f"host manifest: {files.manifest} ({installed})")
    print(f"host script:   {files.wrapper}")
    print(how_to_load(args.browser))
    return EXIT_OK


def how_to_load(browser: str) -> str:
    """Where the extension's folder is, its ID, and how to load it in ``browser``."""
    page = "chrome://extensions"
    return "\n".join(
        [
            f"extension:     {extension_dir()}",
            f"extension ID:  {extension_id()}",
            f"To load it in {browser}: open {page}, turn on Developer mode, choose "
            '"Load unpacked" and pick the extension folder above (or start the browser with '
            "--load-extension=FOLDER).",
        ]
    )
