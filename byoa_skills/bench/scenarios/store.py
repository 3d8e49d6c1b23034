"""``store``: the wallet's database at size: a grant taken and a call recorded with 10,000
sites and 1,000,000 activity entries, the wallet page's query (one site, newest 100), and the
event loop's longest stall while a burst of 1,000 calls is recorded."""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from byoa_skills.bench.context import Context
from byoa_skills.bench.stats import summarize
from byoa_skills.skills import SkillEngine
from byoa_skills.store.activity import ActivityLog, entry_row
from byoa_skills.store.clock import now_ms, rfc3339
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim.shim import WalletShim

NAME = "store"
TITLE = "The wallet's database"

MANIFEST: dict[str, Any] = {
    "byoa": "0.1-draft",
    "purpose": {"summary": "A benchmark site", "limits": {"maxCallsPerMinute": 1000}},
    "skills": {"audio.transcribe": {"languages": ["en"], "required": True}},
    "privacy": "personal-voice",
    "expectedCost": {"perSession": "0 USD"},
}


def sizes(quick: bool) -> tuple[int, int, int]:
    """``(sites, activity entries, samples per figure)`` of a full or a quick run."""
    return (1_000, 100_000, 200) if quick else (10_000, 1_000_000, 1_000)


def fill(database: WalletDatabase, sites: int, entries: int, seed: int = 1) -> list[str]:
    """``sites`` sites and ``entries`` call entries spread over them, in one transaction;
    the sites' origins."""
    origins = [f"https://site{number}.example.org" for number in range(sites)]
    pick = random.Random(seed)
    start = now_ms() - entries * 10
    since = rfc3339(start)

    def rows() -> Any:
        for number in range(entries):
            at = start + number * 10
            entry = {
                "time": rfc3339(at),
                "kind": "call",
                "origin": pick.choice(origins),
                "grant": "g",
                "skill": "audio.transcribe",
                "decision": "allowed",
                "codes": [],
                "outcome": "ok",
                "clipSeconds": 3.2,
                "latencyMs": 640.0,
            }
            yield entry_row(entry, at)

    def change(db: Any) -> None:
        db.executemany(
            "INSERT INTO sites (origin, state, since) VALUES (?, 'active', ?)",
            ((origin, since) for origin in origins),
        )
        db.executemany(
            "INSERT INTO activity (time_ms, kind, origin, skill, decision, outcome, entry) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows(),
        )

    database.write(change)
    return origins


def _ms(samples: list[float]) -> dict[str, float]:
    stats = summarize(samples).to_dict()
    return {k: (v * 1000 if k not in ("n", "spread") else v) for k, v in stats.items()}


async def _measure(
    shim: WalletShim, origins: list[str], samples: int, log: ActivityLog
) -> dict[str, Any]:
    pick = random.Random(2)
    grant = {
        "byoa": "0.1-draft",
        "skills": ["audio.transcribe"],
        "budget": {"perSession": "0 USD"},
        "expiresAt": rfc3339(now_ms() + 3_600_000),
    }
    created, recorded, committed, queried = [], [], [], []
    grants = []
    for _ in range(samples):
        began = time.perf_counter()
        grants.append(shim.create_grant(pick.choice(origins), MANIFEST, grant)["grantId"])
        created.append(time.perf_counter() - began)
    for number in range(samples):
        live = shim.grants.get(grants[number])
        assert live is not None
        entry = {
            "kind": "call",
            "origin": live.origin,
            "grant": live.id,
            "skill": "audio.transcribe",
            "decision": "allowed",
            "codes": [],
            "outcome": "ok",
            "clipSeconds": 3.2,
            "latencyMs": 640.0,
        }
        began = time.perf_counter()
        live.calls += 1
        shim.grants.save_record(live)
        future = log.record(entry)
        recorded.append(time.perf_counter() - began)
        await asyncio.wrap_future(future)
        committed.append(time.perf_counter() - began)
    for _ in range(samples):
        origin = pick.choice(origins)
        began = time.perf_counter()
        await asyncio.to_thread(log.query, origin=origin, limit=100)
        queried.append(time.perf_counter() - began)
    stall, ticks, recorded_in_burst = await _longest_stall(shim, grants, log)
    return {
        "grant_created_ms": _ms(created),
        "call_recorded_ms": _ms(recorded),
        "call_committed_ms": _ms(committed),
        "site_query_ms": _ms(queried),
        "burst_calls": 1000,
        "burst_longest_stall_ms": stall * 1000,
        "burst_stall_samples": ticks,
        "burst_recorded": recorded_in_burst,
    }


async def _longest_stall(
    shim: WalletShim, grants: list[str], log: ActivityLog
) -> tuple[float, int, int]:
    """While 1,000 calls are recorded as a burst (as many tasks at once): the event loop's
    longest lateness in seconds, how many times it was measured, and how many activity
    entries the burst committed."""
    longest = 0.0
    ticks = 0
    done = asyncio.Event()

    def entries() -> int:
        return int(
            log.database.read(lambda db: db.execute("SELECT count(*) FROM activity").fetchone()[0])
        )

    before = await asyncio.to_thread(entries)

    async def ticker() -> None:
        nonlocal longest, ticks
        while not done.is_set():
            began = time.perf_counter()
            await asyncio.sleep(0.001)
            longest = max(longest, time.perf_counter() - began - 0.001)
            ticks += 1

    arrivals = random.Random(3)

    async def one(number: int) -> None:
        live = shim.grants.get(grants[number % len(grants)])
        assert live is not None
        await asyncio.sleep(arrivals.uniform(0, 0.25))  # the burst's calls end within 250 ms
        live.calls += 1
        shim.grants.save_record(live)
        shim.record_activity(
            kind="call",
            origin=live.origin,
            grant=live.id,
            skill="audio.transcribe",
            outcome="ok",
            clipSeconds=1.0,
        )

    watching = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    await asyncio.gather(*(one(number) for number in range(1000)))
    await asyncio.to_thread(log.database.flush)
    done.set()
    await watching
    return longest, ticks, await asyncio.to_thread(entries) - before


def run(ctx: Context) -> dict[str, Any]:
    """Fill a fresh database, then time the shim's work against it."""
    sites, entries, samples = sizes(ctx.settings.quick)
    ctx.reporter.start(NAME, 2)
    folder = Path(tempfile.mkdtemp(prefix="byoa-bench-store-"))
    try:
        database = WalletDatabase(folder / "wallet.sqlite3", import_from=None)
        ctx.reporter.step(f"filling {sites} sites, {entries} activity entries")
        began = time.perf_counter()
        origins = fill(database, sites, entries)
        fill_seconds = time.perf_counter() - began
        ctx.reporter.advance()
        log = ActivityLog(database, max_rows=0, max_age_days=0)
        shim = WalletShim(SkillEngine(None), SiteStore(database), log)  # no model runs
        ctx.reporter.step(f"{samples} grants, calls and queries; a burst of 1,000 calls")
        figures = asyncio.run(_measure(shim, origins, samples, log))
        ctx.reporter.advance()
        database.close()
        size = database.path.stat().st_size
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "sites": sites,
        "activity_entries": entries,
        "samples": samples,
        "fill_s": fill_seconds,
        "database_mib": size / 2**20,
        **figures,
    }
