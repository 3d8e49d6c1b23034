"""The shim's gate in this process: the same decisions as the reference gate, the execution
contract under concurrency (budget, rate), and what only the shim knows."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from bringyourownagent import check_call
from grants import GEO_MANIFEST, grant
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from speech import skill_input

from byoa_skills.models import model_path
from byoa_skills.pool import PoolConfig, WorkerPool
from byoa_skills.skills import PreparedCall, SkillEngine
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.clock import rfc3339
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim.gate import Measured, _decide
from byoa_skills.wallet_shim.grants import GrantRefusal, build_grant
from byoa_skills.wallet_shim.shim import WalletShim

NOW = 1_790_000_000_000  # 2026-09-21, in milliseconds
SKILLS = ["audio.transcribe", "text.generate", "image.generate"]
PROVIDERS = ["local-model", "home-server", "api-key", "subscription", "connected-account"]

money = st.builds(
    lambda cents, cur: f"{cents / 100:.2f} {cur}",
    st.integers(0, 50),
    st.sampled_from(["USD", "USD", "USD", "EUR"]),
)
limits = st.fixed_dictionaries(
    {},
    optional={
        "maxClipSeconds": st.sampled_from([0, 1, 5, 15, 2.5]),
        "maxTextChars": st.integers(0, 40),
        "maxCallsPerMinute": st.integers(0, 4),
    },
)


@st.composite
def cases(
    draw: st.DrawFn,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], int, list[int], str]:
    declared = draw(st.lists(st.sampled_from(SKILLS), min_size=1, unique=True))
    manifest = {
        "byoa": "0.1-draft",
        "purpose": {"summary": "A game", "limits": draw(limits)},
        "skills": {skill: {"required": True} for skill in declared},
        "privacy": draw(st.sampled_from(["personal", "personal-voice", "local-only"])),
    }
    granted = draw(st.lists(st.sampled_from(declared), min_size=1, unique=True))
    document = grant(
        skills=granted,
        budget={"perSession": draw(money)},
        expiresAt=rfc3339(NOW + draw(st.integers(-120_000, 3_600_000))),
        limits=draw(limits) or None,
        localOnly=draw(st.sampled_from([None, True, False])),
        warnIf=draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "sendsText": st.booleans(),
                    "callCostAbove": money,
                    "spendAbove": money,
                },
            )
        )
        or None,
    )
    skill = draw(st.sampled_from(SKILLS))
    measured = {
        "skill": skill,
        "provider": draw(st.sampled_from(PROVIDERS)),
        "estimate": draw(money),
        "clipSeconds": draw(st.sampled_from([0, 0.5, 3, 7.25, 15])),
        "textChars": draw(st.integers(0, 60)),
    }
    spent = draw(money)
    times = draw(st.lists(st.integers(-90_000, 0), max_size=6))
    return manifest, document, measured, NOW, [NOW + t for t in times], spent


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(cases())
def test_decisions_equal_the_reference_gate(case) -> None:  # type: ignore[no-untyped-def]
    manifest, document, measured, now, call_times, spent = case
    reference_call = {
        "skill": measured["skill"],
        "at": rfc3339(now),
        "provider": measured["provider"],
        "estimatedCost": measured["estimate"],
        "input": {"clipSeconds": measured["clipSeconds"], "textChars": measured["textChars"]},
    }
    state = {"spent": spent, "callTimes": [rfc3339(t) for t in call_times]}
    expected = check_call(manifest, document, reference_call, state)
    try:
        built = build_grant("https://a.example", manifest, document, now)
    except GrantRefusal as refusal:
        # refused up front; the reference gate refuses every call of such a grant
        assert expected["decision"] == "blocked"
        codes = {r["code"] for r in expected["reasons"]}
        if refusal.code in ("grant-invalid", "grant-expired"):
            assert refusal.code in codes or "currency-mismatch" in codes
        return
    if spent.split()[-1] != built.currency or measured["estimate"].split()[-1] != built.currency:
        return  # the shim keeps the spend in the budget's currency; nothing to compare
    built.spent = Decimal(spent.split()[0])
    built.call_times.extend(sorted(call_times))
    measured_input = {"clipSeconds": measured["clipSeconds"], "textChars": measured["textChars"]}
    call = Measured(
        measured["skill"],
        {},
        measured_input,
        measured["provider"],
        Decimal(measured["estimate"].split()[0]),
    )
    decided = _decide(built, call, now)
    assert decided.decision == expected["decision"]
    assert [r["code"] for r in decided.reasons] == [r["code"] for r in expected["reasons"]]


# -- the contract under concurrency, with the real pool ------------------------------------


@pytest.fixture(scope="module")
def pool_config(engine_home: Path) -> PoolConfig:
    folder = model_path("tiny.en", cache_dir=engine_home / "cache" / "models")
    return PoolConfig(model_dir=folder, model_name="tiny.en", workers=1, max_queue=64)


def priced(provider: str, cost: str):  # type: ignore[no-untyped-def]
    """A stand-in for a paid provider (none can run here): every call costs ``cost``."""

    def pricing(call: PreparedCall) -> tuple[str, Decimal]:
        return provider, Decimal(cost)

    return pricing


def run_shim(config: PoolConfig, tmp_path: Path, body, **shim_options):  # type: ignore[no-untyped-def]
    async def main():  # type: ignore[no-untyped-def]
        pool = WorkerPool(config)
        await pool.start()
        try:
            engine = SkillEngine(pool)
            database = WalletDatabase(tmp_path / "wallet.sqlite3")
            shim = WalletShim(engine, SiteStore(database), ActivityLog(database), **shim_options)
            return await body(shim)
        finally:
            await pool.close()

    return asyncio.run(main())


HELLO = skill_input("en-hello.wav")


def test_concurrent_calls_never_overspend(pool_config: PoolConfig, tmp_path: Path) -> None:
    async def body(shim: WalletShim) -> tuple[list[Any], dict[str, Any]]:
        summary = shim.create_grant(
            "https://paid.example", GEO_MANIFEST, grant(budget={"perSession": "0.05 USD"})
        )
        calls = [
            shim.call(summary["grantId"], "audio.transcribe", HELLO, {"language": "en"})
            for _ in range(20)
        ]
        results = await asyncio.gather(*calls)
        return results, shim.grants.get(summary["grantId"]).record()

    results, record = run_shim(pool_config, tmp_path, body, pricing=priced("local-model", "0.01"))
    assert sum(r.ok for r in results) == 5
    refused = [r for r in results if not r.ok]
    assert {(r.code, r.decision) for r in refused} == {("budget-exceeded", "ask")}
    # each running call held its worst-case cost; at the end the receipts (a local model's:
    # nothing) replaced the reservations
    assert record["inFlight"] == 0 and record["peakInFlight"] <= 5
    assert Decimal(record["reserved"].split()[0]) == 0 == Decimal(record["spent"].split()[0])


def test_an_approved_ask_runs(pool_config: PoolConfig, tmp_path: Path) -> None:
    asked = []

    async def approve(grant_, call, reasons) -> bool:  # type: ignore[no-untyped-def]
        asked.append([r["code"] for r in reasons])
        return True

    async def body(shim: WalletShim) -> list[Any]:
        summary = shim.create_grant(
            "https://paid.example", GEO_MANIFEST, grant(budget={"perSession": "0.01 USD"})
        )
        # at once: the second is checked while the first holds its reservation
        calls = [shim.call(summary["grantId"], "audio.transcribe", HELLO) for _ in range(2)]
        return await asyncio.gather(*calls)

    first, second = run_shim(
        pool_config, tmp_path, body, ask=approve, pricing=priced("local-model", "0.01")
    )
    assert first.ok and second.ok
    assert asked == [["budget-exceeded"]]


def test_local_only_refuses_a_remote_provider(pool_config: PoolConfig, tmp_path: Path) -> None:
    async def body(shim: WalletShim) -> Any:
        summary = shim.create_grant("https://a.example", GEO_MANIFEST, grant(localOnly=True))
        return await shim.call(summary["grantId"], "audio.transcribe", HELLO)

    result = run_shim(pool_config, tmp_path, body, pricing=priced("api-key", "0"))
    assert (result.code, result.decision) == ("not-local", "blocked")


def test_the_rate_limit_holds_over_a_minute(pool_config: PoolConfig, tmp_path: Path) -> None:
    clock = [NOW]

    async def body(shim: WalletShim) -> list[str]:
        document = grant(limits={"maxCallsPerMinute": 3}, expiresAt=rfc3339(NOW + 3_600_000))
        summary = shim.create_grant("https://a.example", GEO_MANIFEST, document)
        outcomes = []
        for at in (0, 10_000, 20_000, 30_000, 59_999, 60_000, 60_001, 70_000, 80_001):
            clock[0] = NOW + at
            result = await shim.call(summary["grantId"], "audio.transcribe", HELLO)
            outcomes.append("ok" if result.ok else str(result.code))
        return outcomes

    outcomes = run_shim(pool_config, tmp_path, body, clock=lambda: clock[0])
    # the window is (now - 60 s, now]: the call at 0 leaves it at 60 s, the next at 70 s
    assert outcomes == [
        "ok",
        "ok",
        "ok",
        "rate-exceeded",
        "rate-exceeded",
        "ok",
        "rate-exceeded",
        "ok",
        "ok",
    ]


def test_a_failed_call_frees_its_slot(pool_config: PoolConfig, tmp_path: Path) -> None:
    async def body(shim: WalletShim) -> tuple[str, dict[str, Any]]:
        summary = shim.create_grant(
            "https://a.example", GEO_MANIFEST, grant(limits={"maxCallSeconds": 0.05})
        )
        result = await shim.call(summary["grantId"], "audio.transcribe", skill_input("jfk.wav"))
        return str(result.code), shim.grants.get(summary["grantId"]).record()

    code, record = run_shim(replace(pool_config), tmp_path, body)
    assert code == "deadline-exceeded"
    assert record["inFlight"] == 0 and record["peakInFlight"] == 1


def test_a_damaged_site_list_serves_no_site(pool_config: PoolConfig, tmp_path: Path) -> None:
    async def body(shim: WalletShim) -> tuple[str, str]:
        summary = shim.create_grant("https://a.example", GEO_MANIFEST, grant())
        with sqlite3.connect(tmp_path / "wallet.sqlite3") as damage:
            damage.execute("DROP TABLE sites")
        result = await shim.call(summary["grantId"], "audio.transcribe", HELLO)
        try:
            shim.create_grant("https://b.example", GEO_MANIFEST, grant())
            refused = "granted"
        except GrantRefusal as refusal:
            refused = refusal.code
        return str(result.code), refused

    assert run_shim(pool_config, tmp_path, body) == ("site-unreadable", "site-unreadable")
