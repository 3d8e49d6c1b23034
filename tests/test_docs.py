"""The docs and CI say what the code does."""

from __future__ import annotations

import re
from pathlib import Path

from byoa_skills.wav import CODES

ROOT = Path(__file__).resolve().parent.parent


def test_every_wav_code_is_documented() -> None:
    text = (ROOT / "docs" / "wav.md").read_text()
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", text, flags=re.MULTILINE))
    assert documented == set(CODES)


def readme_command(label: str) -> str:
    """The command in the README's fenced block right after the line holding ``label``."""
    text = (ROOT / "README.md").read_text()
    match = re.search(re.escape(label) + r".*?\n```(?:sh|bash)?\n(.+?)\n```", text, re.DOTALL)
    assert match, f"no command after {label!r} in README.md"
    return match.group(1).strip()


def test_ci_runs_exactly_the_readme_test_command() -> None:
    command = readme_command("Install and run the tests")
    ci = (ROOT / ".ci" / "run").read_text()
    assert command in ci.splitlines()


def test_every_text_code_is_documented() -> None:
    from byoa_skills.runtimes.text import CODES as TEXT_CODES

    text = (ROOT / "docs" / "text.md").read_text()
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", text, flags=re.MULTILINE))
    assert set(TEXT_CODES) <= documented
