"""The activity log: entries in the wallet's database, filtered newest first, no audio or
text, retention by age and count, export, several processes at once."""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from byoa_skills.commands import activity as activity_command
from byoa_skills.store.activity import FORBIDDEN_KEYS, ActivityLog
from byoa_skills.store.database import WalletDatabase

GAME = "https://game.example.org"
OTHER = "http://localhost:8080"
ROOT = Path(__file__).resolve().parent.parent
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def log(tmp_path: Path) -> ActivityLog:
    return ActivityLog(WalletDatabase(tmp_path / "wallet.sqlite3"))


def call(number: int, origin: str = GAME, **more: object) -> dict[str, object]:
    return {
        "kind": "call",
        "origin": origin,
        "grant": "g1",
        "skill": "audio.transcribe",
        "decision": "allowed",
        "codes": [],
        "outcome": "ok",
        "clipSeconds": 3.5,
        "model": "base",
        "latencyMs": 640,
        "number": number,
        **more,
    }


def rows(log: ActivityLog) -> int:
    log.database.flush()
    return log.database.read(lambda db: db.execute("SELECT count(*) FROM activity").fetchone()[0])


def test_record_adds_the_time_and_keeps_one_entry(log: ActivityLog) -> None:
    entry = call(1)
    entry_id = log.record(entry).result()
    assert "time" not in entry  # the caller's entry is left as it was
    [written] = log.read()
    assert TIME.fullmatch(written["time"])
    assert next(iter(written)) == "time"
    assert written["id"] == entry_id
    assert {key: value for key, value in written.items() if key not in ("time", "id")} == entry


def test_a_given_time_is_kept(log: ActivityLog) -> None:
    log.record({"kind": "link", "time": "2026-11-30T12:00:00.000Z", "outcome": "ok"}).result()
    assert log.read()[0]["time"] == "2026-11-30T12:00:00.000Z"


def test_the_log_is_private_and_in_the_data_folder(home: Path) -> None:
    log = ActivityLog()
    log.record(call(1)).result()
    assert log.database.path == home / "data" / "wallet.sqlite3"
    assert stat.S_IMODE(log.database.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.database.path.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("key", sorted(FORBIDDEN_KEYS))
def test_entries_that_could_hold_audio_or_text_are_refused(log: ActivityLog, key: str) -> None:
    with pytest.raises(ValueError, match="never holds audio or text"):
        log.record({"kind": "call", key: "hello"})
    with pytest.raises(ValueError, match="never holds audio or text"):
        log.record({"kind": "call", "params": {"nested": [{key.upper(): "x"}]}})
    assert rows(log) == 0


def test_measured_sizes_are_not_refused(log: ActivityLog) -> None:
    log.record({"kind": "call", "skill": "text.generate", "textChars": 120, "cost": 0.0004})
    log.database.flush()
    assert log.read()[0]["textChars"] == 120


def test_entries_that_are_not_json_are_refused(log: ActivityLog) -> None:
    with pytest.raises(ValueError, match="not JSON"):
        log.record({"kind": "call", "latencyMs": float("nan")})
    with pytest.raises(ValueError, match="not JSON"):
        log.record({"kind": "call", "grant": object()})
    with pytest.raises(ValueError, match="mapping"):
        log.record(["kind", "call"])  # type: ignore[arg-type]
    assert rows(log) == 0


def test_read_filters_by_origin_and_limits(log: ActivityLog) -> None:
    for number in range(10):
        log.record(call(number, GAME if number % 2 else OTHER))
    log.database.flush()
    assert [entry["number"] for entry in log.read()] == list(range(10))
    assert [entry["number"] for entry in log.read(origin=GAME)] == [1, 3, 5, 7, 9]
    assert [entry["number"] for entry in log.read(origin="HTTPS://Game.example.org:443")] == [
        1,
        3,
        5,
        7,
        9,
    ]
    assert [entry["number"] for entry in log.read(origin=OTHER, limit=2)] == [6, 8]
    assert [entry["number"] for entry in log.read(limit=3)] == [7, 8, 9]
    assert log.read(limit=0) == []
    assert log.read(origin="https://nobody.example.org") == []
    with pytest.raises(ValueError, match="not an origin"):
        log.read(origin="game.example.org")
    with pytest.raises(ValueError, match="limit"):
        log.read(limit=-1)


def test_query_filters_by_site_skill_decision_and_code_newest_first(log: ActivityLog) -> None:
    log.record(call(0))
    log.record(call(1, skill="text.generate"))
    log.record(call(2, decision="blocked", outcome="rate-exceeded"))
    log.record(call(3, OTHER, decision="blocked", outcome="rate-exceeded"))
    log.record({"kind": "grant", "origin": GAME, "outcome": "ok", "number": 4})
    log.database.flush()

    def numbers(**filters: object) -> list[object]:
        return [entry["number"] for entry in log.query(**filters)]  # type: ignore[arg-type]

    assert numbers() == [4, 3, 2, 1, 0]
    assert numbers(origin=GAME) == [4, 2, 1, 0]
    assert numbers(skill="text.generate") == [1]
    assert numbers(decision="blocked") == [3, 2]
    assert numbers(code="rate-exceeded", origin=GAME) == [2]
    assert numbers(origin=GAME, limit=2) == [4, 2]
    page = log.query(origin=GAME, limit=2)
    assert numbers(origin=GAME, before=page[-1]["id"]) == [1, 0]
    assert numbers(code="site-blocked") == []


def test_reading_a_log_never_written_is_empty(tmp_path: Path) -> None:
    log = ActivityLog(WalletDatabase(tmp_path / "nothing" / "wallet.sqlite3"))
    assert log.read() == []
    assert log.query() == []


def test_retention_removes_entries_past_the_count_and_the_age(log: ActivityLog) -> None:
    kept = ActivityLog(log.database, max_rows=5, max_age_days=1)
    for number in range(12):
        kept.record(call(number))
    kept.record(call(99, time="2020-01-01T00:00:00.000Z"))  # its row's time is now: kept
    log.database.flush()
    assert kept.prune().result() == 13 - 5
    assert [entry["number"] for entry in kept.read()] == [8, 9, 10, 11, 99]
    log.database.write(
        lambda db: db.execute(
            "UPDATE activity SET time_ms = time_ms - 2 * 86400000 "
            "WHERE json_extract(entry, '$.number') = 8"
        )
    )
    assert kept.prune().result() == 1
    assert [entry["number"] for entry in kept.read()] == [9, 10, 11, 99]


def test_no_bounds_keep_everything(log: ActivityLog) -> None:
    forever = ActivityLog(log.database, max_rows=0, max_age_days=0)
    for number in range(20):
        forever.record(call(number))
    assert forever.prune().result() == 0
    assert len(forever.read()) == 20


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    database = WalletDatabase(tmp_path / "wallet.sqlite3")
    with pytest.raises(ValueError, match="max_rows"):
        ActivityLog(database, max_rows=-1)
    with pytest.raises(ValueError, match="max_age_days"):
        ActivityLog(database, max_age_days=-1)


def test_export_writes_json_lines_oldest_first(log: ActivityLog, tmp_path: Path) -> None:
    for number in range(3):
        log.record(call(number))
    log.database.flush()
    target = tmp_path / "out" / "activity.jsonl"
    assert log.export(target) == 3
    lines = target.read_text().splitlines()
    assert [json.loads(line)["number"] for line in lines] == [0, 1, 2]
    assert all("id" not in json.loads(line) for line in lines)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from byoa_skills.store.activity import ActivityLog
    from byoa_skills.store.database import WalletDatabase

    path, name, go, count = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    log = ActivityLog(WalletDatabase(path))
    for _ in range(2000):  # start together, so the writers overlap
        if go.exists():
            break
        time.sleep(0.005)
    for number in range(count):
        log.record({"kind": "call", "origin": "https://game.example.org", "grant": name * 700,
                    "writer": name, "number": number})
    log.database.close()
    """
)


def test_several_processes_write_at_once_and_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "data" / "wallet.sqlite3"
    go = tmp_path / "go"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    names = ["a", "b", "c", "d"]
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), name, str(go), "200"],
            env=environment,
            cwd=ROOT,
        )
        for name in names
    ]
    go.touch()
    for writer in writers:
        assert writer.wait(timeout=120) == 0
    entries = ActivityLog(WalletDatabase(path)).read()
    assert len(entries) == 4 * 200
    for name in names:
        mine = [entry for entry in entries if entry["writer"] == name]
        assert [entry["number"] for entry in mine] == list(range(200))
        assert all(entry["grant"] == name * 700 for entry in mine)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# The command


def activity(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="byoa-skills")
    activity_command.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["activity", *argv])
    return args.run(args)


def test_command_prints_json_lines(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = ActivityLog()
    for number in range(5):
        log.record(call(number, GAME if number % 2 else OTHER))
    log.database.flush()
    assert activity("--json") == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [entry["number"] for entry in printed] == [0, 1, 2, 3, 4]
    assert activity("--json", "--origin", GAME, "--limit", "1") == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [entry["number"] for entry in printed] == [3]


def test_command_prints_plain_lines(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ActivityLog().record(call(1)).result()
    ActivityLog().record(
        {
            "kind": "call",
            "origin": GAME,
            "skill": "text.generate",
            "decision": "blocked",
            "codes": ["text-too-long"],
            "outcome": "text-too-long",
            "textChars": 9000,
        }
    ).result()
    assert activity() == 0
    first, second = (line.split("\t") for line in capsys.readouterr().out.splitlines())
    assert first[1:] == ["call", GAME, "audio.transcribe", "allowed", "ok", "3.5 s", "640 ms", "-"]
    assert second[1:] == [
        "call",
        GAME,
        "text.generate",
        "blocked",
        "text-too-long",
        "9000 chars",
        "-",
        "-",
    ]


def test_command_prints_a_table_on_a_terminal(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ActivityLog().record(call(1, "http://[::1]:8080")).result()
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "200")
    assert activity() == 0
    out = capsys.readouterr().out
    assert "http://[::1]:8080" in out
    assert "640 ms" in out


def test_command_on_an_empty_log(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert activity("--json") == 0
    assert capsys.readouterr().out == ""


def test_command_usage_errors_exit_2(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert activity("--origin", "game.example.org") == 2
    assert "not an origin" in capsys.readouterr().err
    with pytest.raises(SystemExit) as caught:
        activity("--limit", "-1")
    assert caught.value.code == 2
    with pytest.raises(SystemExit) as caught:
        activity("--limit", "many")
    assert caught.value.code == 2
    args = argparse.Namespace(origin=None, limit=-3, json=False)
    assert activity_command.run(args) == 2


def test_command_filters_and_exports(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = ActivityLog()
    log.record(call(0))
    log.record(call(1, decision="blocked", outcome="rate-exceeded"))
    log.record(call(2, OTHER, skill="text.generate"))
    log.database.flush()
    assert activity("--json", "--code", "rate-exceeded") == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [entry["number"] for entry in printed] == [1]
    assert activity("--json", "--skill", "text.generate") == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [entry["number"] for entry in printed] == [2]
    target = tmp_path / "mine.jsonl"
    assert activity("--export", str(target)) == 0
    assert "3 entries" in capsys.readouterr().err
    assert [json.loads(line)["number"] for line in target.read_text().splitlines()] == [0, 1, 2]
