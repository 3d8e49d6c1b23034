"""The activity log: whole lines, rotation, no audio or text, reading across files."""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from byoa_skills.commands import activity as activity_command
from byoa_skills.store.activity import FORBIDDEN_KEYS, ActivityLog

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
    return ActivityLog(tmp_path / "activity")


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


def test_record_adds_the_time_and_writes_one_line(log: ActivityLog) -> None:
    entry = call(1)
    log.record(entry)
    assert "time" not in entry  # the caller's entry is left as it was
    lines = log.path.read_text().splitlines()
    assert len(lines) == 1
    written = json.loads(lines[0])
    assert TIME.fullmatch(written["time"])
    assert next(iter(written)) == "time"
    assert {key: value for key, value in written.items() if key != "time"} == entry
    assert log.read() == [written]


def test_a_given_time_is_kept(log: ActivityLog) -> None:
    log.record({"kind": "link", "time": "2026-11-30T12:00:00.000Z", "outcome": "ok"})
    assert log.read()[0]["time"] == "2026-11-30T12:00:00.000Z"


def test_the_log_is_private_and_in_the_data_folder(home: Path) -> None:
    log = ActivityLog()
    log.record(call(1))
    assert log.path == home / "data" / "activity" / "activity.jsonl"
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.folder.stat().st_mode) == 0o700


@pytest.mark.parametrize("key", sorted(FORBIDDEN_KEYS))
def test_entries_that_could_hold_audio_or_text_are_refused(log: ActivityLog, key: str) -> None:
    with pytest.raises(ValueError, match="never holds audio or text"):
        log.record({"kind": "call", key: "hello"})
    with pytest.raises(ValueError, match="never holds audio or text"):
        log.record({"kind": "call", "params": {"nested": [{key.upper(): "x"}]}})
    assert not log.path.exists()


def test_measured_sizes_are_not_refused(log: ActivityLog) -> None:
    log.record({"kind": "call", "skill": "text.generate", "textChars": 120, "cost": 0.0004})
    assert log.read()[0]["textChars"] == 120


def test_entries_that_are_not_json_are_refused(log: ActivityLog) -> None:
    with pytest.raises(ValueError, match="not JSON"):
        log.record({"kind": "call", "latencyMs": float("nan")})
    with pytest.raises(ValueError, match="not JSON"):
        log.record({"kind": "call", "grant": object()})
    with pytest.raises(ValueError, match="mapping"):
        log.record(["kind", "call"])  # type: ignore[arg-type]
    assert not log.path.exists()


def test_read_filters_by_origin_and_limits(log: ActivityLog) -> None:
    for number in range(10):
        log.record(call(number, GAME if number % 2 else OTHER))
    assert [entry["number"] for entry in log.read()] == list(range(10))
    assert [entry["number"] for entry in log.read(origin=GAME)] == [1, 3, 5, 7, 9]
    assert [entry["number"] for entry in log.read(origin="HTTPS://Game.example.org:443")] == [
        1, 3, 5, 7, 9
    ]  # fmt: skip
    assert [entry["number"] for entry in log.read(origin=OTHER, limit=2)] == [6, 8]
    assert [entry["number"] for entry in log.read(limit=3)] == [7, 8, 9]
    assert log.read(limit=0) == []
    assert log.read(origin="https://nobody.example.org") == []
    with pytest.raises(ValueError, match="not an origin"):
        log.read(origin="game.example.org")
    with pytest.raises(ValueError, match="limit"):
        log.read(limit=-1)


def test_reading_a_log_never_written_is_empty(tmp_path: Path) -> None:
    log = ActivityLog(tmp_path / "nothing")
    assert log.read() == []
    assert not log.folder.exists()


def test_a_torn_last_line_is_skipped(log: ActivityLog) -> None:
    for number in range(3):
        log.record(call(number))
    with open(log.path, "ab") as file:
        file.write(b'{"time":"2026-11-30T12:00:00.000Z","kind":"ca')
    assert [entry["number"] for entry in log.read()] == [0, 1, 2]
    log.record(call(3))  # begins on a line of its own
    assert [entry["number"] for entry in log.read()] == [0, 1, 2, 3]
    assert [entry["number"] for entry in log.read(limit=1)] == [3]


def test_lines_that_are_not_objects_are_skipped(log: ActivityLog) -> None:
    log.record(call(0))
    with open(log.path, "ab") as file:
        file.write(b"[1, 2]\n\nnot json\n")
    log.record(call(1))
    assert [entry["number"] for entry in log.read()] == [0, 1]


def test_the_log_rotates_by_size_and_keeps_the_newest_files(tmp_path: Path) -> None:
    timed = {"time": "2026-11-30T12:00:00.000Z", **call(10)}
    size = len(json.dumps(timed, separators=(",", ":"))) + 1  # every line has this size
    log = ActivityLog(tmp_path / "activity", max_bytes=3 * size, keep=2)
    for number in range(10, 40):
        log.record(call(number))
    names = sorted(path.name for path in log.folder.iterdir() if not path.name.endswith(".lock"))
    assert names == ["activity.jsonl", "activity.jsonl.1", "activity.jsonl.2"]
    for path in log.files():
        assert path.stat().st_size <= 3 * size
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    kept = [entry["number"] for entry in log.read()]
    assert kept == list(range(31, 40))  # three files of three lines: the newest, in order
    in_files = [
        [json.loads(line)["number"] for line in path.read_text().splitlines()]
        for path in log.files()
    ]
    assert [number for numbers in in_files for number in numbers] == kept
    assert [entry["number"] for entry in log.read(limit=5)] == list(range(35, 40))


def test_a_line_larger_than_the_limit_gets_a_file_of_its_own(tmp_path: Path) -> None:
    log = ActivityLog(tmp_path / "activity", max_bytes=50, keep=3)
    for number in range(3):
        log.record(call(number))
    assert [len(path.read_text().splitlines()) for path in log.files()] == [1, 1, 1]
    assert [entry["number"] for entry in log.read()] == [0, 1, 2]


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep"):
        ActivityLog(tmp_path, keep=0)
    with pytest.raises(ValueError, match="max_bytes"):
        ActivityLog(tmp_path, max_bytes=0)


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from byoa_skills.store.activity import ActivityLog

    folder, name, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    max_bytes, count = int(sys.argv[4]), int(sys.argv[5])
    log = ActivityLog(folder, max_bytes=max_bytes, keep=500)
    for _ in range(2000):  # start together, so the writers overlap
        if go.exists():
            break
        time.sleep(0.005)
    for number in range(count):
        # A long value makes a line that a careless writer would tear.
        log.record({"kind": "call", "origin": "https://game.example.org", "grant": name * 700,
                    "writer": name, "number": number})
    """
)


def write_at_once(folder: Path, tmp_path: Path, max_bytes: int, count: int) -> list[str]:
    go = tmp_path / "go"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    names = ["a", "b", "c", "d"]
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(folder), name, str(go), str(max_bytes), str(count)],
            env=environment,
            cwd=ROOT,
        )
        for name in names
    ]
    go.touch()
    for writer in writers:
        assert writer.wait(timeout=120) == 0
    return names


def test_several_processes_append_only_whole_lines(tmp_path: Path) -> None:
    folder = tmp_path / "activity"
    names = write_at_once(folder, tmp_path, max_bytes=1 << 30, count=200)
    raw = (folder / "activity.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    entries = [json.loads(line) for line in raw.splitlines()]  # every line is whole
    assert len(entries) == 4 * 200
    for name in names:
        mine = [entry for entry in entries if entry["writer"] == name]
        assert [entry["number"] for entry in mine] == list(range(200))
        assert all(entry["grant"] == name * 700 for entry in mine)


def test_several_processes_rotating_lose_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "activity"
    names = write_at_once(folder, tmp_path, max_bytes=8 * 1024, count=100)
    log = ActivityLog(folder, keep=500)
    assert len(log.files()) > 10
    entries = log.read()
    assert len(entries) == 4 * 100
    for name in names:
        numbers = [entry["number"] for entry in entries if entry["writer"] == name]
        assert numbers == list(range(100))
    for path in log.files():
        assert path.read_bytes().endswith(b"\n")


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
    assert activity("--json") == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [entry["number"] for entry in printed] == [0, 1, 2, 3, 4]
    assert activity("--json", "--origin", GAME, "--limit", "1") == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [entry["number"] for entry in printed] == [3]


def test_command_prints_plain_lines(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ActivityLog().record(call(1))
    ActivityLog().record(
        {"kind": "call", "origin": GAME, "skill": "text.generate", "decision": "blocked",
         "codes": ["text-too-long"], "outcome": "text-too-long", "textChars": 9000}
    )  # fmt: skip
    assert activity() == 0
    first, second = (line.split("\t") for line in capsys.readouterr().out.splitlines())
    assert first[1:] == [
        "call", GAME, "audio.transcribe", "allowed", "ok", "3.5 s", "640 ms", "-"
    ]  # fmt: skip
    assert second[1:] == [
        "call", GAME, "text.generate", "blocked", "text-too-long", "9000 chars", "-", "-"
    ]  # fmt: skip


def test_command_prints_a_table_on_a_terminal(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ActivityLog().record(call(1, "http://[::1]:8080"))
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
