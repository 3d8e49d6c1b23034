"""Shared fixtures: a model cache and one warm engine for the whole session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from engine import Engine, start_engine
from llama import LlamaServer, start_llama

from byoa_skills.models import ensure_model


@pytest.fixture(scope="session")
def engine_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``BYOA_SKILLS_HOME`` whose cache holds ``base`` and ``tiny.en``, assembled once."""
    home = tmp_path_factory.mktemp("byoa-home")
    for name in ("base", "tiny.en"):
        ensure_model(name, cache_dir=home / "cache" / "models")
    return home


@pytest.fixture(scope="session")
def engine(engine_home: Path) -> Iterator[Engine]:
    """``byoa-skills serve`` on ``base`` with two single-threaded workers, warm."""
    running = start_engine(engine_home, "--model", "base", "--workers", "2", "--queue", "32")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama.cpp's server with SmolLM2-135M-Instruct on loopback, one thread."""
    server = start_llama(tmp_path_factory.mktemp("llama") / "llama.log")
    try:
        yield server
    finally:
        server.stop()
