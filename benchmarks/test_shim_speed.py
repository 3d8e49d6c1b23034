"""The shim's own cost per call: the gate (reference check + record), and a whole call through
the shim with a model that answers at once (so only the shim's work is timed).

    pytest benchmarks/test_shim_speed.py --benchmark-enable
"""

from __future__ import annotations

import asyncio
import sys
from decimal import Decimal
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from grants import GEO_MANIFEST, grant
from speech import skill_input

from byoa_skills.runtimes.text import ChunkHook
from byoa_skills.skills import LOCAL_RECEIPT, CallResult, PreparedCall, SkillEngine
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.clock import now_ms
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim.gate import Measured, admit, finish
from byoa_skills.wallet_shim.grants import build_grant
from byoa_skills.wallet_shim.shim import WalletShim

#: The geography game, and one call every 2 s: within its 40 calls a minute.
SPACING_MS = 2000
FAR = "2099-01-01T00:00:00Z"


class InstantEngine(SkillEngine):
    """The real checks and measurements, and a model that answers at once."""

    def __init__(self) -> None:
        super().__init__(pool=type("Pool", (), {"config": type("C", (), {"model_name": "base"})})())

    async def run(self, call: PreparedCall, on_chunk: ChunkHook | None = None) -> CallResult:
        return CallResult(ok=True, output={"text": ""}, receipt=dict(LOCAL_RECEIPT))


@pytest.mark.benchmark(group="shim")
def test_gate_check_and_record(benchmark) -> None:  # type: ignore[no-untyped-def]
    built = build_grant("https://a.example", GEO_MANIFEST, grant(expiresAt=FAR), now_ms())
    call = Measured("audio.transcribe", {}, {"clipSeconds": 3.2}, "local-model", Decimal(0))
    loop = asyncio.new_event_loop()
    clock = iter(range(now_ms(), 2**62, SPACING_MS))

    def once() -> bool:
        admission = loop.run_until_complete(admit(built, call, next(clock)))
        finish(built, admission, Decimal(0))
        return admission.admitted

    assert benchmark(once)
    loop.close()


@pytest.mark.benchmark(group="shim")
def test_whole_call_through_the_shim(benchmark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    clock = iter(range(now_ms(), 2**62, SPACING_MS))
    shim = WalletShim(
        InstantEngine(),
        SiteStore(WalletDatabase(tmp_path / "w.sqlite3")),
        ActivityLog(WalletDatabase(tmp_path / "w.sqlite3")),
        clock=lambda: next(clock),
    )
    grant_id = shim.create_grant("https://a.example", GEO_MANIFEST, grant(expiresAt=FAR))["grantId"]
    hello = skill_input("en-hello.wav")
    loop = asyncio.new_event_loop()
    result = benchmark(
        lambda: loop.run_until_complete(
            shim.call(grant_id, "audio.transcribe", hello, {"language": "en"})
        )
    )
    assert result.ok
    loop.close()


@pytest.mark.benchmark(group="shim")
def test_whole_call_without_the_shim(benchmark) -> None:  # type: ignore[no-untyped-def]
    engine = InstantEngine()
    hello = skill_input("en-hello.wav")
    loop = asyncio.new_event_loop()
    result = benchmark(
        lambda: loop.run_until_complete(engine.call("audio.transcribe", hello, {"language": "en"}))
    )
    assert result.ok
    loop.close()
