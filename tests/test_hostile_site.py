"""Each attack of the reference site's hostile mode (``site-demo --hostile KIND``) replayed
against the real engine over the direct link: the engine holds, and each call is answered at
most once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from engine import Engine
from test_direct_link import take_link, until

from byoa_skills.demos.site.app import start_site
from byoa_skills.demos.site.hostile import AttackReport
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.database import WalletDatabase


def attacked(
    engine: Engine, kind: str, calls: int = 50, hold: float = 10
) -> tuple[dict[str, Any], AttackReport]:
    """Take a link to a site that makes attack ``kind``; the engine's answer to the link and
    what the site saw."""

    async def main() -> tuple[dict[str, Any], AttackReport]:
        runner, _, demo = await start_site(
            host="localhost", hostile=kind, hostile_calls=calls, hostile_hold=hold
        )
        try:
            _, link = demo.new_code("127.0.0.1")
            answer = await take_link(engine, link)
            if kind != "lies-in-welcome":
                await until(lambda: bool(demo.attacks), f"the {kind} attack's end", 180)
            return answer, demo.attacks[0] if demo.attacks else AttackReport(kind)
        finally:
            await demo.close()
            await runner.cleanup()

    return asyncio.run(main())


def link_outcomes(engine: Engine) -> list[str]:
    log = ActivityLog(WalletDatabase(engine.home / "data" / "wallet.sqlite3"))
    return [entry.get("outcome", "") for entry in log.read() if entry.get("kind") == "link"]


def released_grants(engine: Engine, grant_id: str) -> list[dict[str, Any]]:
    """The activity's ``release`` entries of ``grant_id``, once there is one (or after 30 s)."""
    entries = engine.activity_once(
        lambda texts: any(grant_id in t and '"release"' in t for t in texts)
    )
    found = [json.loads(text) for text in entries]
    return [e for e in found if e.get("kind") == "release" and e.get("grant") == grant_id]


def still_serves(engine: Engine) -> bool:
    return engine.get("/health", token=None)[0] == 200


def test_a_flood_is_answered_once_per_call(engine: Engine) -> None:
    answer, report = attacked(engine, "floods", calls=1000)
    assert answer["ok"], answer
    assert report.sent == 1000
    assert report.answered == 1000, "every call answered"
    assert report.answered_twice == 0
    assert all(frames[0]["ok"] is False for frames in report.results.values())
    assert still_serves(engine)


def test_nesting_closes_the_link_as_malformed(engine: Engine) -> None:
    answer, report = attacked(engine, "nests")
    assert answer["ok"], answer
    assert report.closed_with is not None and report.closed_with[0] == 1007, report
    asyncio.run(until(lambda: "malformed" in link_outcomes(engine), "the link's end", 30))
    assert still_serves(engine)


def test_calls_with_huge_or_odd_ids_are_never_answered(engine: Engine) -> None:
    answer, report = attacked(engine, "huge-ids")
    assert answer["ok"], answer
    assert set(report.results) == {2}, "only the call with a usable id is answered"
    assert report.results[2][0]["ok"] is True
    assert report.closed_with is not None and report.closed_with[0] == 1007, "NaN is not JSON"


def test_a_welcome_with_another_manifest_ends_the_session(engine: Engine) -> None:
    answer, _ = attacked(engine, "lies-in-welcome")
    assert answer["ok"] is False and answer["code"] == "manifest-mismatch", answer


def test_a_site_that_never_reads_is_closed_and_its_grant_freed(engine: Engine) -> None:
    # 60,000 short calls whose 128-character ids every answer echoes: megabytes of answers,
    # more than the site's socket buffers take while it reads nothing
    answer, report = attacked(engine, "never-reads", calls=60_000, hold=90)
    assert answer["ok"], answer
    assert report.closed_with == (None, "dropped"), "the wallet closed the connection"
    # a few hundred calls fill the buffers; fewer get through on a busy machine (911 seen)
    assert report.sent > 500, "the wallet kept reading while it could write"
    entries = engine.activity_once(lambda texts: any('"not-reading"' in t for t in texts), 60)
    links = [e for e in map(json.loads, entries) if e.get("kind") == "link"]
    assert any(entry.get("outcome") == "not-reading" for entry in links), links[-3:]
    grants = released_grants(engine, answer["grantId"])
    assert grants, "the link's grant was released, and its slots with it"
    assert still_serves(engine)
