"""Where the extension and its native host live: the extension's folder in the package, its
fixed ID, and the host manifest (with the small script it names) in a browser's per-user
folder or in one profile's ``NativeMessagingHosts/``."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from byoa_skills.extension.host import HOST_NAME
from byoa_skills.store.paths import HOME_ENV, home_root

#: The browsers whose per-user folders are known, by the name ``--browser`` takes.
BROWSERS = ("chromium", "chrome")
_LINUX = {"chromium": "chromium", "chrome": "google-chrome"}
_MAC = {"chromium": "Chromium", "chrome": "Google/Chrome"}
HOST_DESCRIPTION = "BYOA agent wallet: lets pages use your own AI within your limits"
#: The script the host manifest names (its ``path`` cannot carry arguments).
WRAPPER = HOST_NAME + ".sh"


class InstallError(Exception):
    """The host cannot be installed here; the message says why."""


@dataclass(frozen=True)
class HostFiles:
    """The two files of an installed host: its manifest and the script the manifest names."""

    manifest: Path
    wrapper: Path


def extension_dir() -> Path:
    """The extension's folder (load it unpacked): ``manifest.json`` and its scripts."""
    return Path(str(resources.files("byoa_skills.extension").joinpath("browser")))


def extension_id(folder: Path | None = None) -> str:
    """The extension's ID, fixed by the ``key`` in its manifest: the first 128 bits of the
    key's SHA-256, each hex digit written ``a``-``p``."""
    manifest = json.loads(((folder or extension_dir()) / "manifest.json").read_text("utf-8"))
    digest = hashlib.sha256(base64.b64decode(manifest["key"])).hexdigest()[:32]
    return "".join(chr(ord("a") + int(digit, 16)) for digit in digest)


def hosts_dir(browser: str, user_data_dir: Path | None = None) -> Path:
    """The folder the browser reads per-user host manifests from: the profile's
    ``NativeMessagingHosts/`` when ``user_data_dir`` is given, else the user's folder for
    ``browser``. Raises :class:`InstallError` where that is not a folder (Windows: the
    registry)."""
    if user_data_dir is not None:
        return user_data_dir.absolute() / "NativeMessagingHosts"
    if browser not in BROWSERS:
        raise InstallError(f"unknown browser {browser!r} (known: {', '.join(BROWSERS)})")
    if sys.platform.startswith("linux"):
        config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        return config / _LINUX[browser] / "NativeMessagingHosts"
    if sys.platform == "darwin":
        support = Path.home() / "Library" / "Application Support"
        return support / _MAC[browser] / "NativeMessagingHosts"
    raise InstallError("on this system the host is registered by the wallet app's installer")


def host_files(folder: Path) -> HostFiles:
    """The host's files in ``folder``."""
    return HostFiles(folder / f"{HOST_NAME}.json", folder / WRAPPER)


def host_manifest(wrapper: Path, ext_id: str) -> dict[str, object]:
    """The host manifest: the host's name, the script to start, and the one extension that
    may start it."""
    return {
        "name": HOST_NAME,
        "description": HOST_DESCRIPTION,
        "path": str(wrapper),
        "type": "stdio",
        "allowed_origins": [f"chrome-extension://{ext_id}/"],
    }


def wrapper_script(port: int, start: bool, serve_args: Sequence[str]) -> str:
    """The script the browser starts: this Python running ``byoa-skills native-host`` with
    the options chosen at install, and ``$BYOA_SKILLS_HOME`` when one was set then."""
    words = [sys.executable, "-m", "byoa_skills", "native-host", f"--port={port}"]
    if not start:
        words.append("--no-start")
    words += [f"--serve-arg={arg}" for arg in serve_args]
    lines = [
        "#!/bin/sh",
        "# The BYOA agent wallet's native host, written by `byoa-skills extension install`.",
    ]
    root = home_root()
    if root is not None:
        lines.append(f"export {HOME_ENV}={shlex.quote(str(root))}")
    lines.append("exec " + " ".join(shlex.quote(word) for word in words) + ' "$@"')
    return "\n".join(lines) + "\n"


def install(folder: Path, port: int, start: bool, serve_args: Sequence[str]) -> HostFiles:
    """Write the host's script and manifest into ``folder`` (made if needed); the files."""
    files = host_files(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _write(files.wrapper, wrapper_script(port, start, serve_args), 0o700)
    manifest = host_manifest(files.wrapper, extension_id())
    _write(files.manifest, json.dumps(manifest, indent=2) + "\n", 0o644)
    return files


def uninstall(folder: Path) -> list[Path]:
    """Remove the host's files from ``folder``; those that were there."""
    removed = []
    for path in (host_files(folder).manifest, host_files(folder).wrapper):
        if path.exists():
            path.unlink()
            removed.append(path)
    return removed


def _write(path: Path, text: str, mode: int) -> None:
    """Write ``text`` to ``path`` atomically with ``mode``."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, "utf-8")
    partial.chmod(mode)
    os.replace(partial, path)
