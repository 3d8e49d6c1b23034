"""``byoa-skills scheme install | uninstall | show``: the ``bringyourownagent:`` links of this
user's desktop open ``byoa-skills connect``.

On Linux the scheme is registered for the current user only, with a desktop entry that
handles ``x-scheme-handler/bringyourownagent`` (never a generic scheme name another program
could take), made the default with ``xdg-mime`` where it exists.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from byoa_skills.store.files import write_private

SCHEME = "bringyourownagent"
MIME_TYPE = f"x-scheme-handler/{SCHEME}"
ENTRY_NAME = "byoa-skills-link.desktop"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``scheme`` to the ``byoa-skills`` parser."""
    command = subparsers.add_parser(
        "scheme",
        help="let bringyourownagent:// links open this wallet (this user only)",
        description=(
            "Register the bringyourownagent: scheme for the current user with a desktop "
            "entry that runs 'byoa-skills connect LINK' (Linux, freedesktop). 'show' prints "
            "the entry without writing it. Exit 0 done, 1 failed, 2 usage error."
        ),
    )
    command.add_argument("action", choices=("install", "uninstall", "show"))
    command.set_defaults(run=run)


def applications_dir() -> Path:
    """The user's applications folder (``$XDG_DATA_HOME/applications``)."""
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "applications"


def desktop_entry(program: str | None = None) -> str:
    """The desktop entry that hands a link to ``byoa-skills connect``."""
    program = program or shutil.which("byoa-skills") or f"{sys.executable} -m byoa_skills"
    return "\n".join(
        [
            "[Desktop Entry]",
            "Type=Application",
            "Name=BYOA agent wallet link",
            "Comment=Takes bringyourownagent:// links from web sites",
            f"Exec={program if ' ' in program else shlex.quote(program)} connect %u",
            "Terminal=false",  # the consent is on the wallet page
            "NoDisplay=true",
            f"MimeType={MIME_TYPE};",
            "",
        ]
    )


def run(args: argparse.Namespace) -> int:
    """Install, remove or show the registration."""
    path = applications_dir() / ENTRY_NAME
    if args.action == "show":
        print(desktop_entry(), end="")
        return 0
    if args.action == "uninstall":
        path.unlink(missing_ok=True)
        print(f"removed {path}")
        return 0
    write_private(path, desktop_entry().encode())
    os.chmod(path, 0o644)  # a desktop entry is read by the desktop, like any other
    xdg_mime = shutil.which("xdg-mime")
    if xdg_mime:
        done = subprocess.run([xdg_mime, "default", ENTRY_NAME, MIME_TYPE], check=False)
        if done.returncode != 0:
            print(
                f"byoa-skills: xdg-mime could not make it the default for {MIME_TYPE}",
                file=sys.stderr,
            )
            return 1
    print(f"installed {path} for {MIME_TYPE}")
    return 0
