"""The site list: states, origins, the database's private file, two writers at once."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from byoa_skills.commands import sites as sites_command
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import (
    SiteChangePending,
    SiteEntry,
    SiteListError,
    SiteStore,
    normalize_origin,
)

GAME = "https://game.example.org"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def store(tmp_path: Path) -> SiteStore:
    return SiteStore(WalletDatabase(tmp_path / "data" / "wallet.sqlite3"))


@pytest.mark.parametrize(
    ("given", "origin"),
    [
        ("https://game.example.org", "https://game.example.org"),
        ("http://localhost:8080", "http://localhost:8080"),
        ("HTTPS://Game.Example.ORG", "https://game.example.org"),
        ("https://game.example.org:443", "https://game.example.org"),
        ("http://localhost:80", "http://localhost"),
        ("https://game.example.org:8443", "https://game.example.org:8443"),
        ("http://127.0.0.1:8787", "http://127.0.0.1:8787"),
        ("http://[::1]:8080", "http://[::1]:8080"),
        ("http://[0:0:0:0:0:0:0:1]", "http://[::1]"),
        ("https://xn--bcher-kva.example", "https://xn--bcher-kva.example"),
    ],
)
def test_origins_are_normalised(given: str, origin: str) -> None:
    assert normalize_origin(given) == origin


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("game.example.org", "looks like https://"),
        ("https://game.example.org/", "did you mean https://game.example.org?"),
        ("https://game.example.org/play?x=1", "no path, query or fragment"),
        ("https://game.example.org#top", "no path, query or fragment"),
        ("ftp://game.example.org", "http or https"),
        ("chrome-extension://abc", "http or https"),
        ("https://user:pw@game.example.org", "no user name or password"),
        ("https://", "host is missing"),
        ("https://:8080", "host is missing"),
        ("https://game.example.org:0", "port must be a number"),
        ("https://game.example.org:65536", "port must be a number"),
        ("https://game.example.org:http", "port must be a number"),
        ("https://game..example.org", "not a host name"),
        ("https://-game.example.org", "not a host name"),
        ("https://game_1.example.org", "not a host name"),
        ("https://bücher.example", "ASCII form"),
        ("https://300.1.1.1", "not an IPv4 address"),
        ("http://[::g]", "not an IPv6 address"),
        ("", "looks like https://"),
    ],
)
def test_bad_origins_are_refused_with_a_clear_message(given: str, says: str) -> None:
    with pytest.raises(ValueError, match="not an origin") as caught:
        normalize_origin(given)
    assert says in str(caught.value)


def test_an_unknown_origin_is_active(store: SiteStore) -> None:
    assert store.state(GAME) == "active"
    assert store.list() == []


def test_state_transitions(store: SiteStore) -> None:
    assert store.pause(GAME) is True
    assert store.state(GAME) == "paused"
    assert store.pause(GAME) is False
    assert store.block(GAME) is True
    assert store.state(GAME) == "blocked"
    assert store.resume(GAME) is True
    assert store.state(GAME) == "active"
    assert store.resume(GAME) is False
    assert store.block(GAME) is True
    assert store.forget(GAME) is True
    assert store.state(GAME) == "active"
    assert store.list() == []
    assert store.forget(GAME) is False


def test_resume_of_an_unknown_origin_changes_nothing(store: SiteStore) -> None:
    assert store.resume(GAME) is False
    assert store.list() == []


def test_origins_are_matched_after_normalising(store: SiteStore) -> None:
    store.block("HTTPS://Game.Example.org:443")
    assert store.state(GAME) == "blocked"
    assert [entry.origin for entry in store.list()] == [GAME]


def test_methods_refuse_bad_origins(store: SiteStore) -> None:
    for method in (store.state, store.pause, store.resume, store.block, store.forget, store.seen):
        with pytest.raises(ValueError, match="not an origin"):
            method("game.example.org")
    assert store.list() == []


def test_seen_keeps_the_state_and_first_seen(store: SiteStore) -> None:
    store.seen(GAME).result()
    first = store.get(GAME)
    assert first is not None and first.first_seen is not None
    assert first.state == "active" and first.last_seen == first.first_seen
    store.block(GAME)
    store.seen(GAME).result()
    again = store.get(GAME)
    assert again is not None
    assert again.state == "blocked"
    assert again.first_seen == first.first_seen
    assert again.last_seen is not None and again.last_seen >= first.first_seen


def test_list_is_sorted_and_holds_frozen_entries(store: SiteStore) -> None:
    store.block("https://b.example.org")
    store.pause("https://a.example.org", note="too many calls")
    store.seen("http://localhost:8080").result()
    entries = store.list()
    assert [(entry.origin, entry.state) for entry in entries] == [
        ("http://localhost:8080", "active"),
        ("https://a.example.org", "paused"),
        ("https://b.example.org", "blocked"),
    ]
    assert entries[1].note == "too many calls"
    assert all(entry.since.endswith("Z") and "T" in entry.since for entry in entries)
    with pytest.raises(AttributeError):
        entries[0].state = "blocked"  # type: ignore[misc]
    assert isinstance(entries[0], SiteEntry)


def test_the_list_persists_across_instances(store: SiteStore) -> None:
    store.pause(GAME)
    store.block("http://localhost:8080")
    other = SiteStore(WalletDatabase(store.database.path))
    assert other.state(GAME) == "paused"
    assert other.state("http://localhost:8080") == "blocked"
    assert other.list() == store.list()


def test_a_reader_sees_another_instances_change(store: SiteStore) -> None:
    reader = SiteStore(WalletDatabase(store.database.path))
    assert reader.state(GAME) == "active"
    store.pause(GAME)
    assert reader.state(GAME) == "paused"
    store.block(GAME)
    assert reader.state(GAME) == "blocked"
    store.forget(GAME)
    assert reader.state(GAME) == "active"


def test_decide_on_my_own_is_kept_per_site(store: SiteStore) -> None:
    assert store.set_decide_on_my_own(GAME, True) is True
    assert store.set_decide_on_my_own(GAME, True) is False
    entry = store.get(GAME)
    assert entry is not None and entry.decide_on_my_own and entry.state == "active"
    assert entry.to_json()["decideOnMyOwn"] is True
    assert store.set_decide_on_my_own(GAME, False) is True
    assert store.get(GAME).decide_on_my_own is False  # type: ignore[union-attr]


def test_the_default_database_is_in_the_data_folder(home: Path) -> None:
    store = SiteStore()
    store.pause(GAME)
    assert store.database.path == home / "data" / "wallet.sqlite3"
    with sqlite3.connect(store.database.path) as db:
        assert db.execute("SELECT state FROM sites WHERE origin = ?", (GAME,)).fetchone() == (
            "paused",
        )


def test_the_database_is_private_and_in_wal_mode(store: SiteStore) -> None:
    for number in range(10):
        store.block(f"https://site{number}.example.org")
    store.forget("https://site3.example.org")
    path = store.database.path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT count(*) FROM sites").fetchone() == (9,)


def test_a_database_that_cannot_be_read_is_an_error_not_an_empty_list(tmp_path: Path) -> None:
    path = tmp_path / "data" / "wallet.sqlite3"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    store = SiteStore(WalletDatabase(path))
    with pytest.raises(SiteListError):
        store.state(GAME)
    with pytest.raises(SiteListError):
        store.list()
    with pytest.raises(SiteListError):
        store.pause(GAME)


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from byoa_skills.store.database import WalletDatabase
    from byoa_skills.store.sites import SiteStore

    path, name, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    store = SiteStore(WalletDatabase(path))
    for _ in range(2000):  # start together, so the two writers overlap
        if go.exists():
            break
        time.sleep(0.005)
    for number in range(50):
        origin = f"https://{name}{number}.example.org"
        if number % 2:
            store.block(origin)
        else:
            store.pause(origin)
        store.seen("https://shared.example.org")
    store.database.close()
    """
)


def test_two_processes_change_the_list_at_once_and_nothing_is_lost(tmp_path: Path) -> None:
    path = tmp_path / "data" / "wallet.sqlite3"
    go = tmp_path / "go"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), name, str(go)], env=environment, cwd=ROOT
        )
        for name in ("left", "right")
    ]
    go.touch()
    for writer in writers:
        assert writer.wait(timeout=120) == 0
    states = {entry.origin: entry.state for entry in SiteStore(WalletDatabase(path)).list()}
    assert len(states) == 101
    for name in ("left", "right"):
        for number in range(50):
            expected = "blocked" if number % 2 else "paused"
            assert states[f"https://{name}{number}.example.org"] == expected
    assert states["https://shared.example.org"] == "active"


# The command


def sites(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="byoa-skills")
    sites_command.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["sites", *argv])
    return args.run(args)


def test_command_changes_and_exit_codes(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sites("pause", "HTTPS://Game.example.org") == 0
    assert capsys.readouterr().out == f"paused {GAME}\n"
    assert sites("pause", GAME) == 1
    assert "already paused" in capsys.readouterr().err
    assert sites("block", GAME) == 0
    assert sites("resume", GAME) == 0
    assert sites("resume", GAME) == 1
    assert sites("forget", GAME) == 0
    assert sites("forget", GAME) == 1
    assert "not in the site list" in capsys.readouterr().err
    assert SiteStore().list() == []


def test_command_sets_decide_on_my_own(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sites("decide-on-my-own", GAME, "on") == 0
    assert sites("decide-on-my-own", GAME, "on") == 1
    assert "already on" in capsys.readouterr().err
    assert SiteStore().get(GAME).decide_on_my_own is True  # type: ignore[union-attr]
    assert sites("decide-on-my-own", GAME, "off") == 0
    with pytest.raises(SystemExit):
        sites("decide-on-my-own", GAME, "maybe")


def test_command_refuses_a_bad_origin(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sites("block", "game.example.org") == 2
    assert "not an origin" in capsys.readouterr().err
    assert sites("pause", "https://game.example.org/play") == 2
    assert SiteStore().list() == []


def test_command_usage_errors_exit_2(home: Path) -> None:
    with pytest.raises(SystemExit) as caught:
        sites("pause")
    assert caught.value.code == 2
    with pytest.raises(SystemExit) as caught:
        sites("rename", GAME)
    assert caught.value.code == 2


def test_command_lists_as_json_and_plain_lines(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sites("list", "--json") == 0
    assert json.loads(capsys.readouterr().out) == []
    SiteStore().block(GAME)
    SiteStore().seen("http://localhost:8080").result()
    assert sites("list", "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(item["origin"], item["state"]) for item in listed] == [
        ("http://localhost:8080", "active"),
        (GAME, "blocked"),
    ]
    assert set(listed[0]) == {
        "origin",
        "state",
        "since",
        "firstSeen",
        "lastSeen",
        "note",
        "decideOnMyOwn",
    }
    assert sites("list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[:2] for line in lines] == [
        ["http://localhost:8080", "active"],
        [GAME, "blocked"],
    ]


def test_command_lists_a_table_on_a_terminal(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    SiteStore().pause("http://[::1]:8080")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "160")
    assert sites("list") == 0
    out = capsys.readouterr().out
    assert "http://[::1]:8080" in out
    assert "paused" in out


def test_command_reports_a_damaged_list(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "data").mkdir(parents=True)
    (home / "data" / "sites.json").write_text("[]")  # an old list to import, damaged
    assert sites("list") == 2
    assert "not a site list" in capsys.readouterr().err
    assert (home / "data" / "sites.json").read_text() == "[]"  # kept as it was


def test_run_takes_a_plain_namespace(home: Path) -> None:
    args = argparse.Namespace(sites_command="block", origin=GAME)
    assert sites_command.run(args) == 0
    assert SiteStore().state(GAME) == "blocked"


def test_a_block_the_store_refuses_is_in_force_at_once_and_written_later(tmp_path: Path) -> None:
    path = tmp_path / "data" / "wallet.sqlite3"
    path.parent.mkdir(mode=0o700)
    path.write_bytes(b"not a database " * 100)
    database = WalletDatabase(path)
    sites = SiteStore(database, keep_unwritten=True)
    with pytest.raises(SiteChangePending) as pending:
        sites.block(GAME)
    assert pending.value.code == "store-damaged" and pending.value.changed is True
    assert sites.state(GAME) == "blocked"  # in force, though nothing could be read
    with pytest.raises(SiteListError):
        sites.state("https://other.example.org")  # every other site: unreadable
    assert sites.unwritten() == {GAME: "blocked"}
    assert database.status().pending_changes == 1
    path.rename(tmp_path / "damaged.sqlite3")  # the visitor moves the damaged file aside
    deadline = time.monotonic() + 30
    while sites.unwritten() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sites.unwritten() == {} and database.status().ok
    assert SiteStore(WalletDatabase(path)).state(GAME) == "blocked"  # written
    database.close()


def test_without_keep_unwritten_a_refused_change_is_not_in_force(tmp_path: Path) -> None:
    path = tmp_path / "wallet.sqlite3"
    path.write_bytes(b"not a database " * 100)
    sites = SiteStore(WalletDatabase(path))  # the CLI's: it says the change failed
    with pytest.raises(SiteListError) as refused:
        sites.block(GAME)
    assert not isinstance(refused.value, SiteChangePending)
    assert sites.unwritten() == {}
    with pytest.raises(SiteListError):
        sites.state(GAME)


def test_changes_held_in_turn_are_written_in_order(tmp_path: Path) -> None:
    path = tmp_path / "wallet.sqlite3"
    path.write_bytes(b"not a database " * 100)
    database = WalletDatabase(path)
    sites = SiteStore(database, keep_unwritten=True)
    for change in (sites.pause, sites.block, sites.resume):
        with pytest.raises(SiteChangePending):
            change(GAME)
    with pytest.raises(SiteListError):
        sites.state(GAME)  # resumed, but a store that cannot be read serves no site
    assert [entry.state for entry in sites_after_repair(path, sites)] == ["active"]
    assert SiteStore(WalletDatabase(path)).get(GAME) is not None  # the pause and block ran
    database.close()


def sites_after_repair(path: Path, sites: SiteStore) -> list[SiteEntry]:
    """Move the damaged file aside, wait until every held change is written; the list."""
    path.rename(path.with_name("damaged.sqlite3"))
    deadline = time.monotonic() + 30
    while sites.unwritten() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sites.unwritten() == {}
    return sites.list()
