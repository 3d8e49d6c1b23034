"""``byoa-skills wav check`` as a user runs it: a real subprocess, its output and exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from wavkit import chunk, fmt_body, pcm, riff, wav


def byoa_skills(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "byoa_skills", *args], capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    made = {
        "good": wav(16000),
        "long": wav(16000 * 16),
        "stereo": riff(
            chunk(b"fmt ", fmt_body(channels=2, block_align=4, byte_rate=64000)),
            chunk(b"data", pcm(100)),
        ),
    }
    paths = {}
    for name, data in made.items():
        paths[name] = tmp_path / f"{name}.wav"
        paths[name].write_bytes(data)
    return paths


def test_all_valid_exits_0(files: dict[str, Path]) -> None:
    done = byoa_skills("wav", "check", str(files["good"]))
    assert done.returncode == 0
    assert done.stdout == f"{files['good']}: ok, 16000 frames, 1.000 s\n"


def test_any_invalid_exits_1_and_names_the_code(files: dict[str, Path]) -> None:
    done = byoa_skills("wav", "check", str(files["good"]), str(files["stereo"]))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0].endswith("ok, 16000 frames, 1.000 s")
    assert lines[1].startswith(f"{files['stereo']}: not-mono: ")


def test_json_output(files: dict[str, Path]) -> None:
    done = byoa_skills("wav", "check", "--json", *(str(p) for p in files.values()))
    assert done.returncode == 1
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    assert [set(r) for r in reports] == [{"file", "ok", "code", "message", "frames", "seconds"}] * 3
    good, long, stereo = reports
    assert good == {
        "file": str(files["good"]),
        "ok": True,
        "code": None,
        "message": None,
        "frames": 16000,
        "seconds": 1.0,
    }
    assert (long["ok"], long["code"], long["frames"]) == (False, "too-long", None)
    assert (stereo["ok"], stereo["code"]) == (False, "not-mono")


def test_max_seconds(files: dict[str, Path]) -> None:
    assert byoa_skills("wav", "check", "--max-seconds", "16", str(files["long"])).returncode == 0
    done = byoa_skills("wav", "check", "--max-seconds", "0.5", "--json", str(files["good"]))
    assert json.loads(done.stdout)["code"] == "too-long"
    assert done.returncode == 1


def test_unreadable_file_exits_2_after_checking_the_rest(
    files: dict[str, Path], tmp_path: Path
) -> None:
    missing = tmp_path / "missing.wav"
    done = byoa_skills("wav", "check", "--json", str(missing), str(files["stereo"]))
    assert done.returncode == 2
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert (first["ok"], first["code"]) == (False, "unreadable")
    assert second["code"] == "not-mono"


def test_a_folder_is_unreadable(tmp_path: Path) -> None:
    done = byoa_skills("wav", "check", str(tmp_path))
    assert done.returncode == 2
    assert ": unreadable: " in done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["wav", "check"],
        ["wav", "check", "--max-seconds", "0", "x.wav"],
        ["wav", "check", "--max-seconds", "nan", "x.wav"],
        ["wav", "check", "--max-seconds", "soon", "x.wav"],
        ["wav"],
        ["nonsense"],
        [],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    done = byoa_skills(*args)
    assert done.returncode == 2
    assert "usage:" in done.stderr


def test_help_explains_the_exit_statuses() -> None:
    done = byoa_skills("wav", "check", "--help")
    assert done.returncode == 0
    assert "Exit 0 when every file is valid" in " ".join(done.stdout.split())


def test_console_scripts_are_installed() -> None:
    bindir = Path(sys.executable).parent
    done = subprocess.run(
        [str(bindir / "byoa-skills"), "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.startswith("byoa-skills ")
    bench = subprocess.run(
        [str(bindir / "byoa-bench"), "--help"], capture_output=True, text=True, timeout=60
    )
    assert bench.returncode == 0 and "usage: byoa-bench" in bench.stdout
