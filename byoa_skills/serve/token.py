"""The bearer token of the local API: made once, kept readable only by the user.

A token file or folder someone else could have planted or could read (another owner, mode
0644, a folder mode 0777) is refused with :class:`UnsafePathError`, never used.
"""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path

from byoa_skills.store import paths
from byoa_skills.store.files import UnsafePathError, read_secret, write_private

__all__ = ["TOKEN_ENV", "UnsafePathError", "load_or_create_token", "token_path"]

TOKEN_ENV = "BYOA_SKILLS_TOKEN"
TOKEN_FILE = "token"


def token_path() -> Path:
    """Where the token lives: the user's config folder."""
    return paths.config_dir() / TOKEN_FILE


def load_or_create_token(path: Path | None = None) -> tuple[str, Path, bool]:
    """``(token, path, created)``: the token in ``path``, made there first if there is none.

    A new token has 256 random bits; the file is written atomically with mode 0600, in a
    folder made with mode 0700. An existing token file is used only when it is the user's
    own regular file with mode 0600 (or stricter) in a folder only the user may change;
    otherwise :class:`UnsafePathError` says why.
    """
    path = path or token_path()
    with contextlib.suppress(FileNotFoundError):
        existing = read_secret(path).decode("ascii", "replace").strip()
        if existing:
            return existing, path, False
    token = secrets.token_urlsafe(32)
    write_private(path, (token + "\n").encode("ascii"))
    return token, path, True
