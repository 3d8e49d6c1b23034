"""``byoa-skills sources`` and the sources file: what is taken, what is refused, and what a
source that answers or is down looks like."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from engine import free_port
from fake_sources import OPENROUTER_KEY, ollama_app, openrouter_app, serving

from byoa_skills.runtimes.text import SourceConfigError, SourceStore, default_config
from byoa_skills.runtimes.text.config import config_from_json, source_from_json


def sources(home: Path, *args: str, **env: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "byoa_skills", "sources", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "BYOA_SKILLS_HOME": str(home), **env},
    )
    return done.returncode, done.stdout, done.stderr


def test_without_a_file_lm_studio_and_ollama_are_known(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    assert list(default_config().sources) == ["lmstudio", "ollama"]
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-v1-x")
    assert default_config().sources["openrouter"].provider_kind == "api-key"


def test_add_list_default_remove(tmp_path: Path) -> None:
    with serving(ollama_app) as ollama, serving(openrouter_app) as openrouter:
        assert sources(tmp_path, "add", "home", "--kind", "ollama", "--url", ollama.url)[0] == 0
        code, out, _ = sources(
            tmp_path,
            "add",
            "router",
            "--kind",
            "openrouter",
            "--url",
            openrouter.url + "/api/v1",
            "--key-env",
            "OR_KEY",
        )
        assert code == 0 and "api-key" in out
        down = f"http://127.0.0.1:{free_port()}/v1"
        assert sources(tmp_path, "add", "gone", "--kind", "openai", "--url", down)[0] == 0
        assert sources(tmp_path, "default", "home/echo")[0] == 0
        code, out, _ = sources(tmp_path, "list", "--json", OR_KEY=OPENROUTER_KEY)
    assert code == 0
    listed = {entry["name"]: entry for entry in json.loads(out)}
    assert set(listed) == {"lmstudio", "ollama", "home", "router", "gone"}
    assert listed["home"]["answers"] and listed["home"]["models"] == ["echo:latest", "echo:7b"]
    assert listed["router"]["models"] == ["fake/echo-1", "fake/shifty"]
    assert not listed["gone"]["answers"] and listed["gone"]["problem"].startswith("source-down")
    path = tmp_path / "config" / "sources.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert SourceStore(path).load().default_model == "home/echo"
    assert sources(tmp_path, "remove", "gone")[0] == 0
    assert sources(tmp_path, "remove", "gone")[0] == 1
    assert "gone" not in SourceStore(path).load().sources


def test_find_sees_a_local_server_on_its_usual_port(tmp_path: Path) -> None:
    with serving(ollama_app, port=11434):
        code, out, _ = sources(tmp_path, "find", "--add", "--json")
    assert code == 0
    found = {entry["name"]: entry["answers"] for entry in json.loads(out)}
    assert found["ollama"] is True
    assert list(SourceStore(tmp_path / "config" / "sources.json").load().sources) == [
        "lmstudio",
        "ollama",
    ]  # already known by its address: not added twice


def test_when_nothing_answers_the_list_says_so(tmp_path: Path) -> None:
    code, out, _ = sources(
        tmp_path, "add", "gone", "--kind", "openai", "--url", f"http://127.0.0.1:{free_port()}/v1"
    )
    code, out, _ = sources(tmp_path, "--timeout", "1")
    assert code == 1 and "down" in out and "source-down" in out


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"name": "Big Name", "kind": "openai", "url": "http://localhost:1/v1"}, "name"),
        ({"name": "x", "kind": "anthropic", "url": "http://localhost:1/v1"}, "kind"),
        ({"name": "x", "kind": "openai", "url": "ftp://localhost/v1"}, "http(s)"),
        ({"name": "x", "kind": "openai", "url": "http://example.com/v1"}, "plain http"),
        ({"name": "x", "kind": "openai", "url": "https://u:p@example.com/v1"}, "credentials"),
        (
            {"name": "x", "kind": "openai", "url": "http://localhost:1/v1", "maxConcurrent": 0},
            "maxConcurrent",
        ),
        (
            {"name": "x", "kind": "openai", "url": "http://localhost:1", "provider": "cloud"},
            "provider",
        ),
    ],
)
def test_bad_source_entries_are_refused(entry: dict[str, Any], problem: str) -> None:
    with pytest.raises(SourceConfigError) as refused:
        source_from_json(entry)
    assert problem in str(refused.value)


def test_where_a_source_is_decides_its_provider_kind() -> None:
    def kind(url: str, **extra: Any) -> str:
        return source_from_json({"name": "x", "kind": "openai", "url": url, **extra}).provider_kind

    assert kind("http://127.0.0.1:1234/v1") == "local-model"
    assert kind("http://192.168.1.20:11434") == "home-server"
    assert kind("https://llm.example.org/v1") == "home-server"
    assert kind("https://llm.example.org/v1", provider="api-key") == "api-key"


def test_a_damaged_file_is_an_error_not_a_silent_default(tmp_path: Path) -> None:
    path = tmp_path / "config" / "sources.json"
    path.parent.mkdir()
    path.write_text("{not json")
    with pytest.raises(SourceConfigError):
        SourceStore(path).load()
    with pytest.raises(SourceConfigError, match="twice"):
        config_from_json(
            {
                "sources": [
                    {"name": "a", "kind": "ollama", "url": "http://localhost:1"},
                    {"name": "a", "kind": "ollama", "url": "http://localhost:2"},
                ]
            }
        )
    code, _, err = sources(tmp_path, "list")
    assert code == 2 and "cannot be read" in err
