"""The purpose judge's routes answer a store they cannot read as every wallet route does: the
store's own code and status (503 for a database of random bytes), never a 500."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine import Engine, start_engine
from test_store_damaged import health, home_with_models, random_bytes, wallet_api

from byoa_skills.protocol.codes import status_of


@pytest.fixture(scope="module")
def broken(engine_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """A warm ``serve`` (tiny.en, one worker) whose database is random bytes."""
    home = home_with_models(engine_home, tmp_path_factory.mktemp("judge-damaged"))
    random_bytes(home / "data")
    running = start_engine(home, "--model", "tiny.en", "--workers", "1", log_name="judge.log")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def test_the_judge_routes_answer_the_stores_code(broken: Engine) -> None:
    code = health(broken)["store"]["code"]
    calls = [
        ("GET", "/wallet/api/sites", None),
        ("GET", "/wallet/api/judge", None),
        ("POST", "/wallet/api/judge", {"on": True}),
    ]
    answers = asyncio.run(wallet_api(broken, calls))
    (sites_status, sites), *judge = answers
    assert sites_status == status_of(code) == 503 and sites["code"] == code
    for status, body in judge:
        assert (status, body["ok"], body["code"]) == (503, False, code)
    assert "Traceback" not in broken.log.read_text(errors="replace")
