"""The commands: ``platform-demo`` as a real process, ``pair`` and ``pairings`` against it."""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from byoa_skills.cli import main


@dataclass
class Demo:
    name: str
    issuer: str
    code: str
    session: str
    output: list[str]

    def new_code(self) -> str:
        request = urllib.request.Request(
            f"{self.issuer}/account/pairing-codes",
            method="POST",
            headers={"Authorization": f"Bearer {self.session}"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return str(json.loads(answer.read())["code"])


@pytest.fixture(scope="module")
def demo() -> Iterator[Demo]:
    """``byoa-skills platform-demo --port 0``, until the module's tests are done."""
    process = subprocess.Popen(
        [sys.executable, "-m", "byoa_skills", "platform-demo", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    lines: list[str] = []
    try:
        while not any("protected:" in line for line in lines):
            line = process.stderr.readline()
            assert line, "platform-demo stopped: " + "".join(lines)
            lines.append(line)
        text = "".join(lines)
        issuer = re.search(r"platform: (http://localhost:\d+)", text).group(1)  # type: ignore[union-attr]
        code = re.search(r"code: +(\S+)", text).group(1)  # type: ignore[union-attr]
        session = re.search(r"Bearer (\S+)'", text).group(1)  # type: ignore[union-attr]
        yield Demo(issuer.split("://")[1], issuer, code, session, lines)
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=20)  # reads and closes the pipe
        assert process.returncode == 0


@pytest.fixture
def wallet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path))
    monkeypatch.setenv("BYOA_WALLET_DEV_LOCAL", "1")
    return tmp_path


def typed(monkeypatch: pytest.MonkeyPatch, code: str) -> list[str]:
    prompts: list[str] = []
    monkeypatch.setattr("getpass.getpass", lambda prompt: prompts.append(prompt) or code)
    return prompts


def test_pair_list_and_revoke(
    demo: Demo, wallet: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = typed(monkeypatch, demo.code)
    assert main(["pair", demo.name]) == 0
    out, err = capsys.readouterr()
    assert prompts and f"paired with {demo.name}" in out
    assert demo.code not in out + err

    assert main(["pairings", "list", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["platform"] == demo.name and listed["issuer"] == demo.issuer
    assert listed["scope"] == ["audio.transcribe", "text.generate"]
    assert "access_token" not in listed
    assert main(["pairings", "list"]) == 0
    assert capsys.readouterr().out.startswith(f"{demo.name}\taudio.transcribe,text.generate\t")

    assert main(["pairings", "revoke", demo.name]) == 0
    assert "the platform confirmed" in capsys.readouterr().out
    assert main(["pairings", "revoke", demo.name]) == 1
    assert "is not paired" in capsys.readouterr().err


def test_a_refused_pairing_exits_1_with_its_code(
    demo: Demo, wallet: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = demo.new_code()
    typed(monkeypatch, code)
    assert main(["pair", demo.name]) == 0
    capsys.readouterr()
    assert main(["pair", demo.name]) == 1
    out, err = capsys.readouterr()
    assert err.startswith("byoa-skills pair: pairing_code_replayed: ")
    assert code not in out + err


@pytest.mark.parametrize(
    "domain",
    ["https://platform.example", "platform.example/x", "user@platform.example", "Platform.Example"],
)
def test_a_domain_that_is_not_a_host_name_is_a_usage_error(
    wallet: Path, domain: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pair", domain]) == 2
    assert "host name" in capsys.readouterr().err


def test_the_code_is_never_an_argument(wallet: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["pair", "platform.example", "ABCDE-FGHJK"])
    assert exited.value.code == 2


def test_a_held_code_reference_pairs_once(
    demo: Demo, wallet: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = demo.new_code()
    typed(monkeypatch, code)
    assert main(["pair", demo.name, "--hold-code"]) == 0
    reference = capsys.readouterr().out.strip()
    assert reference.startswith("byoag-code-ref-") and code not in reference
    typed(monkeypatch, "not asked")
    assert main(["pair", demo.name, "--code-ref", reference]) == 0
    capsys.readouterr()
    assert main(["pair", demo.name, "--code-ref", reference]) == 1
    assert "pairing_code_invalid" in capsys.readouterr().err


def test_a_plain_code_on_stdin_comes_with_the_model_visibility_notice(
    demo: Demo, wallet: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(demo.new_code() + "\n"))
    assert main(["pair", demo.name, "--code-stdin", "--scope", "audio.transcribe", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "may be visible to a model" in err
    assert json.loads(out)["scope"] == ["audio.transcribe"]


def test_loopback_needs_the_developer_switch(
    demo: Demo, wallet: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("BYOA_WALLET_DEV_LOCAL")
    assert main(["pair", demo.name]) == 2
    assert "BYOA_WALLET_DEV_LOCAL" in capsys.readouterr().err
