"""The wallet's database: its schema and migrations, the import of the JSON files older
versions kept, and grants that outlive the process that took them."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from grants import GEO_MANIFEST, grant
from speech import skill_input

from byoa_skills.skills import PreparedCall, SkillEngine
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.database import StoreError, WalletDatabase, while_busy
from byoa_skills.store.link_pairings import PairingStore, RecentCodes
from byoa_skills.store.problems import StoreStatus
from byoa_skills.store.schema import MIGRATIONS
from byoa_skills.store.sites import SiteListError, SiteStore
from byoa_skills.wallet_shim.shim import WalletShim

ROOT = Path(__file__).resolve().parents[1]
GAME = "https://game.example.org"
HELLO = skill_input("en-hello.wav")


def old_files(folder: Path) -> None:
    """The files an older version kept: a blocked and a paused site, a pairing, a code and a
    log of three entries, the last line torn by a crash."""
    folder.mkdir(parents=True)
    sites = {
        GAME: {"state": "blocked", "since": "2026-11-01T10:00:00Z", "note": "too loud"},
        "http://localhost:8080": {
            "state": "paused",
            "since": "2026-11-02T10:00:00Z",
            "firstSeen": "2026-11-01T09:00:00Z",
        },
    }
    (folder / "sites.json").write_text(json.dumps({"version": 1, "sites": sites}))
    pairing = {"link": "bringyourownagent://connect?v=0.1", "pairing": "tok"}
    (folder / "pairings.json").write_text(json.dumps({"https://quiz.example.org": pairing}))
    (folder / "recent-codes.json").write_text(json.dumps({"ab" * 32: 4_000_000_000.0}))
    log = folder / "activity"
    log.mkdir()
    older = {"time": "2026-11-01T10:00:00.000Z", "kind": "grant", "origin": GAME, "n": 0}
    (log / "activity.jsonl.1").write_text(json.dumps(older) + "\n")
    lines = [
        {"time": "2026-11-02T10:00:00.000Z", "kind": "call", "origin": GAME, "n": 1},
        {"time": "2026-11-03T10:00:00.000Z", "kind": "call", "origin": GAME, "n": 2},
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines) + '{"time":"2026-11-04T1'
    (log / "activity.jsonl").write_text(text)


def test_a_new_database_has_the_latest_schema_in_wal_mode(tmp_path: Path) -> None:
    database = WalletDatabase(tmp_path / "wallet.sqlite3")
    database.open()
    with sqlite3.connect(database.path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),)
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert {"sites", "grants", "recent_codes", "link_pairings", "activity"} <= tables
    assert database.reader().execute("PRAGMA foreign_keys").fetchone() == (1,)


def test_a_database_newer_than_the_engine_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "wallet.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(StoreError, match="newer"):
        WalletDatabase(path).open()
    with pytest.raises(SiteListError):
        SiteStore(WalletDatabase(path)).state(GAME)


def test_the_old_json_files_are_imported_once_and_kept_as_backups(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    old_files(folder)
    database = WalletDatabase(folder / "wallet.sqlite3")
    sites = SiteStore(database)
    assert sites.state(GAME) == "blocked"
    assert sites.state("http://localhost:8080") == "paused"
    assert sites.get(GAME).note == "too loud"  # type: ignore[union-attr]
    assert PairingStore(database).all()["https://quiz.example.org"]["pairing"] == "tok"
    assert RecentCodes(database).seen("never seen") is False
    entries = ActivityLog(database).read()
    assert [entry["n"] for entry in entries] == [0, 1, 2]  # the torn line is skipped
    names = sorted(path.name for path in folder.iterdir())
    assert names == [
        "activity.imported",
        "pairings.json.imported",
        "recent-codes.json.imported",
        "sites.json.imported",
        "wallet.sqlite3",
        "wallet.sqlite3-shm",
        "wallet.sqlite3-wal",
    ]
    (folder / "sites.json").write_text(json.dumps({"version": 1, "sites": {}}))
    assert SiteStore(WalletDatabase(database.path)).state(GAME) == "blocked"  # not read again


def test_a_blocked_site_stays_blocked_across_the_import_and_a_restart(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    old_files(folder)
    first = WalletDatabase(folder / "wallet.sqlite3")
    assert SiteStore(first).state(GAME) == "blocked"
    first.close()
    again = SiteStore(WalletDatabase(folder / "wallet.sqlite3"))
    assert again.state(GAME) == "blocked"
    assert again.resume(GAME) is True


def test_a_damaged_site_list_is_kept_and_no_site_is_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "sites.json").write_text('{"version": 1, "sites": {"https://a.example": 5}}')
    database = WalletDatabase(folder / "wallet.sqlite3")
    with pytest.raises(SiteListError, match="not an origin"):
        SiteStore(database).state(GAME)
    assert (folder / "sites.json").exists()  # kept, for the visitor to repair or remove
    (folder / "sites.json").unlink()
    assert SiteStore(database).state(GAME) == "active"  # the next look makes the database


def test_other_damaged_files_are_kept_reported_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "pairings.json").write_text("{not json")
    (folder / "recent-codes.json").write_text("[1, 2]")
    (folder / "sites.json").write_text(json.dumps({"version": 1, "sites": {}}))
    database = WalletDatabase(folder / "wallet.sqlite3")
    with caplog.at_level(logging.WARNING, logger="byoa_skills.store"):
        assert PairingStore(database).all() == {}
    damaged = [r.getMessage() for r in caplog.records if "import-damaged" in r.getMessage()]
    assert len(damaged) == 2
    assert (folder / "pairings.json").read_text() == "{not json"
    assert (folder / "recent-codes.json").read_text() == "[1, 2]"
    assert (folder / "sites.json.imported").exists()


def test_a_change_that_fails_does_not_lose_the_others_of_its_batch(tmp_path: Path) -> None:
    database = WalletDatabase(tmp_path / "wallet.sqlite3")
    log = ActivityLog(database)
    good = [log.record({"kind": "call", "n": number}) for number in range(3)]
    bad = database.submit(lambda db: db.execute("INSERT INTO nowhere VALUES (1)"))
    more = log.record({"kind": "call", "n": 3})
    with pytest.raises(sqlite3.OperationalError):
        bad.result()
    assert all(future.result() > 0 for future in [*good, more])
    assert [entry["n"] for entry in log.read()] == [0, 1, 2, 3]


def test_a_lock_of_a_moment_is_waited_out_and_any_other_error_is_not() -> None:
    answers = iter([sqlite3.OperationalError("database is locked")] * 3 + ["done"])

    def attempt() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert while_busy(attempt) == "done"
    calls = []

    def broken() -> None:
        calls.append(1)
        raise sqlite3.OperationalError("no such table: nowhere")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        while_busy(broken)
    assert calls == [1]
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        while_busy(
            lambda: (_ for _ in ()).throw(sqlite3.OperationalError("database is locked")),
            seconds=0.05,
        )


OPENER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from byoa_skills.store.activity import ActivityLog
    from byoa_skills.store.database import WalletDatabase

    path, go, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    while not go.exists():
        time.sleep(0.001)
    database = WalletDatabase(path)
    log = ActivityLog(database)
    for number in range(5):
        log.record({"kind": "call", "who": name, "n": number}).result()
        database.close()  # the last close checkpoints the file while the others open it
    """
)


def test_four_processes_make_one_new_database_at_once_and_all_their_writes_land(
    tmp_path: Path,
) -> None:
    for round_ in range(3):
        path = tmp_path / str(round_) / "wallet.sqlite3"
        go = tmp_path / f"go-{round_}"
        environment = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-c", OPENER, str(path), str(go)]
        openers = [
            subprocess.Popen([*command, str(name)], cwd=ROOT, env=environment) for name in range(4)
        ]
        go.touch()
        assert [opener.wait(timeout=120) for opener in openers] == [0, 0, 0, 0]
        entries = ActivityLog(WalletDatabase(path)).read()
        assert sorted((entry["who"], entry["n"]) for entry in entries) == [
            (str(name), number) for name in range(4) for number in range(5)
        ]


def budget_shim(database: WalletDatabase) -> WalletShim:
    """A shim whose every call is priced 0.01 USD (no model runs: the call is refused
    ``skill-unavailable`` once admitted, and costs its reservation)."""

    def pricing(call: PreparedCall) -> tuple[str, Decimal]:
        return "api-key", Decimal("0.01")

    return WalletShim(
        SkillEngine(None), SiteStore(database), ActivityLog(database), pricing=pricing
    )


def test_a_grant_its_calls_and_its_spend_outlive_the_process(tmp_path: Path) -> None:
    path = tmp_path / "wallet.sqlite3"
    limits = {"maxCallsPerMinute": 10}
    given = grant(budget={"perSession": "0.02 USD"}, skills=["audio.transcribe"], limits=limits)

    async def first() -> tuple[str, list[str | None]]:
        shim = budget_shim(WalletDatabase(path))
        grant_id = shim.create_grant(GAME, GEO_MANIFEST, given)["grantId"]
        codes = [(await shim.call(grant_id, "audio.transcribe", HELLO)).code for _ in range(3)]
        shim.sites.database.close()
        return grant_id, codes

    grant_id, codes = asyncio.run(first())
    assert codes[:2] == ["skill-unavailable", "skill-unavailable"]
    assert codes[2] is not None and codes[2] != "skill-unavailable"  # the budget binds

    async def second() -> tuple[dict[str, object], str | None]:
        shim = budget_shim(WalletDatabase(path))
        kept = shim.grants.get(grant_id)
        assert kept is not None
        result = await shim.call(grant_id, "audio.transcribe", HELLO)
        return kept.record(), result.code

    record, code = asyncio.run(second())
    assert record["calls"] == 2 and record["spent"] == "0.02 USD"
    assert record["inFlight"] == 0
    assert code == codes[2]


def test_a_released_or_expired_grant_does_not_come_back(tmp_path: Path) -> None:
    path = tmp_path / "wallet.sqlite3"
    shim = budget_shim(WalletDatabase(path))
    released = shim.create_grant(GAME, GEO_MANIFEST, grant())["grantId"]
    expiring = shim.create_grant(GAME, GEO_MANIFEST, grant())["grantId"]
    assert shim.release_grant(released)
    shim.sites.database.write(
        lambda db: db.execute("UPDATE grants SET expires_ms = 1 WHERE id = ?", (expiring,))
    )
    shim.sites.database.close()
    again = budget_shim(WalletDatabase(path))
    assert again.grants.get(released) is None and again.grants.get(expiring) is None
    again.sites.database.flush()
    assert again.sites.database.read(
        lambda db: db.execute("SELECT count(*) FROM grants").fetchone()
    ) == (0,)


def test_forgetting_a_site_removes_its_kept_grants_and_pairing(tmp_path: Path) -> None:
    database = WalletDatabase(tmp_path / "wallet.sqlite3")
    shim = budget_shim(database)
    shim.create_grant(GAME, GEO_MANIFEST, grant())
    PairingStore(database).keep(GAME, {"link": "x", "pairing": "y"})
    database.flush()
    assert shim.sites.forget(GAME) is True
    counts = database.read(
        lambda db: [
            db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("grants", "link_pairings")
        ]
    )
    assert counts == [0, 0]


def test_hostile_legacy_json_is_skipped_and_the_rest_imported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "data"
    old_files(folder)
    (folder / "recent-codes.json").write_text(
        '{"inf": Infinity, "nan": NaN, "big": 1e30, "fine": 1790000000}'
    )
    hostile = '{"time":"2026-11-05T10:00:00.000Z","kind":"call","latencyMs":NaN}\n'
    (folder / "activity" / "activity.jsonl.2").write_text(hostile)
    database = WalletDatabase(folder / "wallet.sqlite3")
    with caplog.at_level(logging.WARNING, logger="byoa_skills.store"):
        assert database.check().ok
    assert RecentCodes(database).seen("fine") is False  # digests are kept, not codes
    codes = database.read(lambda db: db.execute("SELECT seen_ms FROM recent_codes").fetchall())
    assert codes == [(1_790_000_000_000,)]
    assert [entry["n"] for entry in ActivityLog(database).read()] == [0, 1, 2]
    assert SiteStore(database).state(GAME) == "blocked"
    assert "event=import-skipped file=recent-codes.json entries=3" in caplog.text
    assert "event=import-skipped file=activity lines=1" in caplog.text
    database.close()


@pytest.mark.parametrize(
    ("damage", "code"),
    [
        (lambda path: path.write_bytes(os.urandom(8192)), "store-damaged"),
        (lambda path: path.mkdir(), "store-unsafe"),
        (lambda path: path.parent.chmod(0o777), "store-unsafe"),
        (lambda path: path.with_name("sites.json").write_text("[" * 100_000), "store-damaged"),
    ],
    ids=["random-bytes", "directory", "folder-0777", "sites-json-too-deep"],
)
def test_a_store_that_cannot_be_used_says_why_and_raises_store_error(
    tmp_path: Path, damage: Any, code: str
) -> None:
    path = tmp_path / "data" / "wallet.sqlite3"
    path.parent.mkdir(mode=0o700)
    damage(path)
    database = WalletDatabase(path)
    status = database.check()
    assert (status.ok, status.code) == (False, code) and str(path.parent) in str(status.message)
    with pytest.raises(StoreError) as raised:
        database.read(lambda db: db.execute("SELECT 1").fetchone())
    assert raised.value.code == code
    with pytest.raises(StoreError):
        database.write(lambda db: None)
    assert database.status().code == code
    path.parent.chmod(0o700)


def test_a_database_cut_short_is_refused_as_damaged(tmp_path: Path) -> None:
    path = tmp_path / "wallet.sqlite3"
    database = WalletDatabase(path)
    log = ActivityLog(database)
    for number in range(300):
        log.record({"kind": "call", "origin": GAME, "n": number})
    database.flush()
    database.close()
    os.truncate(path, path.stat().st_size // 2)
    again = WalletDatabase(path)
    with pytest.raises(StoreError, match="malformed") as raised:
        ActivityLog(again).read()
    assert raised.value.code == "store-damaged"


def test_a_repaired_store_is_seen_at_once(tmp_path: Path) -> None:
    path = tmp_path / "wallet.sqlite3"
    path.write_bytes(b"not a database " * 100)
    database = WalletDatabase(path)
    assert database.check().code == "store-damaged"
    path.rename(tmp_path / "wallet.sqlite3.damaged")  # what the message says to do
    assert database.check() == StoreStatus(ok=True)
    assert SiteStore(database).state(GAME) == "active"
    database.close()
