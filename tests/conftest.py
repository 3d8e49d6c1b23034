"""Shared fixtures: a model cache and one warm engine for the whole session.

``--encoder SETTING`` (or ``$BYOA_SKILLS_ENCODER``) runs every engine and backend whose
encoder is ``auto`` on that encoder instead (``ctranslate2``, ``openvino-f32``,
``openvino-bf16``, ``openvino-int8``); ``-m encoder`` picks the tests whose outcome depends
on the encoder.

The engines the tests start decode with CTranslate2's own CPU kernels (``$BYOA_SKILLS_CT2_KERNELS``
``ctranslate2``), not a choice measured while the other test processes load the cores;
``--kernels auto`` (or the variable, set before the run) measures and runs the choice, as a
user's engine does, and ``--kernels LABEL`` forces one.

Every engine and backend of one run keeps its derived encoder files (the OpenVINO graphs, the
int8 encoder that takes tens of seconds to quantize) in one folder, ``$BYOA_SKILLS_DERIVED``,
made for the run and removed after it, whatever home it serves: built once, not once a home.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine import Engine, start_engine
from llama import LlamaServer, start_llama

from byoa_skills.models import ensure_model
from byoa_skills.runtimes.speech.ct2_kernels import KERNELS_ENV
from byoa_skills.runtimes.speech.derived import DERIVED_ENV
from byoa_skills.runtimes.speech.encoder_choice import (
    ENCODER_BACKENDS,
    ENCODER_ENV,
    choose_encoder,
)

_MADE_DERIVED = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--encoder",
        choices=ENCODER_BACKENDS,
        help=f"the encoder that stands in for auto in every engine and backend (${ENCODER_ENV})",
    )
    parser.addoption(
        "--kernels",
        help=f"CTranslate2's CPU kernels in every engine (${KERNELS_ENV}): auto (measured), "
        "ctranslate2 (its own pick: the default here) or a label such as mkl-avx512",
    )


def pytest_configure(config: pytest.Config) -> None:
    forced = config.getoption("--encoder")
    if forced:
        os.environ[ENCODER_ENV] = forced  # the engines the tests start inherit it
    kernels = config.getoption("--kernels")
    if kernels:
        os.environ[KERNELS_ENV] = kernels
    os.environ.setdefault(KERNELS_ENV, "ctranslate2")
    if not hasattr(config, "workerinput") and DERIVED_ENV not in os.environ:
        # made by the run's first process; its test processes and engines inherit it
        os.environ[DERIVED_ENV] = tempfile.mkdtemp(prefix="byoa-derived-")
        config.stash[_MADE_DERIVED] = os.environ[DERIVED_ENV]


def pytest_unconfigure(config: pytest.Config) -> None:
    made = config.stash.get(_MADE_DERIVED, None)
    if made:
        shutil.rmtree(made, ignore_errors=True)


def pytest_report_header(config: pytest.Config) -> str:
    return (
        f"encoder for auto: {choose_encoder('auto').label}; "
        f"CTranslate2's kernels: {os.environ.get(KERNELS_ENV)}"
    )


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
