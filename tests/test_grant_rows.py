"""Grants in the store, by column name, and the one grant an Allow gives: a link, a page's
request and a paired platform all get it from ``allow_grant``, through the one grant
decision."""

from __future__ import annotations

import asyncio
import copy
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from grants import GEO_MANIFEST, grant
from speech import skill_input

from byoa_skills.byoag.keys import PairwiseKeys
from byoa_skills.byoag.registrations import Registration, RegistrationStore
from byoa_skills.byoag.scope import RegistrationCalls
from byoa_skills.consent import decision as decision_module
from byoa_skills.consent.allow import ALLOW_GRANT_SECONDS, allow_grant
from byoa_skills.consent.offer import Offer, offer_grant
from byoa_skills.skills import SkillEngine
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.clock import now_ms
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.grant_rows import (
    GrantRecord,
    GrantRow,
    delete_grants,
    insert_grant,
    read_grants,
    update_record,
)
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim.shim import WalletShim
from byoa_skills.wallet_shim.visitor_choices import VisitorChoices

GAME = "https://geo.example.org"
DAY_MS = 24 * 3600 * 1000
GIVEN = grant()


def row(grant_id: str, **changes: Any) -> GrantRow:
    values: dict[str, Any] = {
        "id": grant_id,
        "origin": GAME,
        "manifest": GEO_MANIFEST,
        "given": GIVEN,
        "limits": {"maxClipSeconds": 15},
        "currency": "USD",
        "created_ms": 1_700_000_000_000,
        "expires_ms": 1_700_003_600_000,
    }
    return GrantRow(**(values | changes))


def test_a_grant_row_and_its_record_come_back_by_column(tmp_path: Path) -> None:
    database = WalletDatabase(tmp_path / "wallet.sqlite3")
    record = GrantRecord(
        calls=3,
        in_flight=1,
        reserved=Decimal("0.010"),
        spent=Decimal("0.25"),
        call_times=(5, 7),
        peak_in_flight=2,
    )
    database.write(lambda db: insert_grant(db, row("a")))
    database.write(lambda db: insert_grant(db, row("b")))
    database.write(lambda db: update_record(db, "a", record))
    kept = database.read(read_grants)
    assert kept.unreadable == []
    assert {r.id: r for r in kept.rows} == {"a": row("a", record=record), "b": row("b")}
    site = database.read(
        lambda db: db.execute("SELECT state, since FROM sites WHERE origin = ?", (GAME,)).fetchone()
    )
    assert site == ("active", "2023-11-14T22:13:20.000Z")  # since the grant was made
    database.write(lambda db: delete_grants(db, ["a", "not-kept"]))
    assert [r.id for r in database.read(read_grants).rows] == ["b"]


def test_a_kept_grant_whose_record_is_damaged_is_dropped_and_the_others_load(
    tmp_path: Path,
) -> None:
    database = WalletDatabase(tmp_path / "wallet.sqlite3")
    shim = WalletShim(SkillEngine(None), SiteStore(database), ActivityLog(database))
    kept_id = shim.create_grant(GAME, GEO_MANIFEST, grant())["grantId"]
    damaged = [shim.create_grant(GAME, GEO_MANIFEST, grant())["grantId"] for _ in range(2)]
    database.flush()
    database.write(
        lambda db: db.execute("UPDATE grants SET call_times = '[1, 2' WHERE id = ?", (damaged[0],))
    )
    database.write(
        lambda db: db.execute("UPDATE grants SET spent = 'lots' WHERE id = ?", (damaged[1],))
    )
    database.close()

    again = WalletShim(SkillEngine(None), SiteStore(database), ActivityLog(database))
    assert again.grants.get(kept_id) is not None
    assert [again.grants.get(grant_id) for grant_id in damaged] == [None, None]
    database.flush()
    left = database.read(lambda db: db.execute("SELECT id FROM grants").fetchall())
    assert left == [(kept_id,)]


def expires_ms(document: dict[str, Any]) -> int:
    return int(
        datetime.fromisoformat(document["expiresAt"].replace("Z", "+00:00")).timestamp() * 1000
    )


def test_every_way_in_gives_the_grant_an_allow_gives() -> None:
    manifest = copy.deepcopy(GEO_MANIFEST)
    skills = sorted(manifest["skills"])
    offer = Offer("https://geo.example.org", manifest, skills)
    before = now_ms()
    given = {
        "no consent": offer_grant(offer, None),
        "consent": offer_grant(offer, VisitorChoices()),
    }
    after = now_ms()
    for way, document in given.items():
        assert {k: v for k, v in document.items() if k != "expiresAt"} == {
            "byoa": "0.1-draft",
            "skills": skills,
            "budget": {"perSession": "0.05 USD"},
        }, way
        # a day from now, to the millisecond the clock gives
        assert before + DAY_MS <= expires_ms(document) <= after + DAY_MS, way
    assert allow_grant(manifest, skills, 0)["expiresAt"] == "1970-01-02T00:00:00.000Z"
    assert ALLOW_GRANT_SECONDS * 1000 == DAY_MS


def test_a_paired_platform_gets_the_grant_an_allow_gives_for_its_scope(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def speech_fits(engine: SkillEngine, manifest: dict[str, Any]) -> set[str]:
        return set(manifest["skills"]) - {"text.generate"}  # no text source here

    monkeypatch.setattr(decision_module, "fitting_skills", speech_fits)
    store = RegistrationStore(tmp_path / "byoag")
    store.save(
        Registration(
            platform="platform.example",
            issuer="https://platform.example",
            registration_id="r1",
            agent_id="a1",
            scope=("text.generate", "audio.transcribe"),
            mode="code",
            jkt="j1",
            paired_at="2026-11-30T00:00:00.000Z",
            access_token="t",
        ),
        PairwiseKeys.new(),
    )
    database = WalletDatabase(tmp_path / "wallet.sqlite3")
    shim = WalletShim(SkillEngine(None), SiteStore(database), ActivityLog(database))
    before = now_ms()
    result = asyncio.run(
        RegistrationCalls(shim, store).call(
            "platform.example", "audio.transcribe", skill_input("en-hello.wav")
        )
    )
    after = now_ms()
    assert result.code == "skill-unavailable"  # admitted under the grant; no speech runs here
    [granted] = shim.grants.all()
    assert granted.origin == "https://platform.example"
    assert granted.skills == ["audio.transcribe"]  # the skills of its scope served here
    assert granted.given["budget"] == {"perSession": "0 USD"}  # its manifest states no cost
    assert before + DAY_MS <= granted.expires_ms <= after + DAY_MS
