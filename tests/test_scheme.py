"""The bringyourownagent: scheme, registered for this user only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def byoa_skills(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(home), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "byoa_skills", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_install_writes_a_user_desktop_entry_for_the_scheme(tmp_path: Path) -> None:
    done = byoa_skills(tmp_path, "scheme", "install")
    entry = tmp_path / "applications" / "byoa-skills-link.desktop"
    assert entry.exists(), done.stderr
    text = entry.read_text()
    assert "MimeType=x-scheme-handler/bringyourownagent;" in text
    assert " connect %u" in text
    assert "Terminal=false" in text  # the consent is on the wallet page, not in a terminal
    assert "byoa:" not in text.replace("byoa-skills", "")  # never a generic scheme
    assert byoa_skills(tmp_path, "scheme", "uninstall").returncode == 0
    assert not entry.exists()


def test_show_writes_nothing(tmp_path: Path) -> None:
    done = byoa_skills(tmp_path, "scheme", "show")
    assert done.returncode == 0 and "[Desktop Entry]" in done.stdout
    assert not (tmp_path / "applications").exists()
