"""The local API's token file."""

from __future__ import annotations

import stat
from pathlib import Path

from byoa_skills.serve.token import load_or_create_token


def test_token_is_made_once_and_kept_private(tmp_path: Path) -> None:
    path = tmp_path / "config" / "token"
    token, where, created = load_or_create_token(path)
    assert (where, created) == (path, True)
    assert len(token) >= 43  # 256 bits in URL-safe base64
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_or_create_token(path) == (token, path, False)
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind


def test_an_empty_token_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("\n")
    token, _, created = load_or_create_token(path)
    assert created and token and path.read_text().strip() == token
