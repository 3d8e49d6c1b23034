"""The bearer token of the local API: made once, kept readable only by the user."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from byoa_skills import paths

TOKEN_ENV = "BYOA_SKILLS_TOKEN"
TOKEN_FILE = "token"


def token_path() -> Path:
    """Where the token lives: the user's config folder."""
    return paths.config_dir() / TOKEN_FILE


def load_or_create_token(path: Path | None = None) -> tuple[str, Path, bool]:
    """``(token, path, created)``: the token in ``path``, made there first if there is none.

    A new token has 256 random bits; the file is written atomically with mode 0600 and its
    folder with mode 0700.
    """
    path = path or token_path()
    with contextlib.suppress(FileNotFoundError):
        existing = path.read_text(encoding="ascii").strip()
        if existing:
            return existing, path, False
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(token + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    return token, path, True
