"""``byoa-skills transcribe`` and ``byoa-skills models`` as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from speech import SPEECH, word_recall


def byoa_skills(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BYOA_SKILLS_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "byoa_skills", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_transcribe_prints_each_text(engine_home: Path, tmp_path: Path) -> None:
    stereo = tmp_path / "stereo.wav"
    stereo.write_bytes(b"RIFF" + (4).to_bytes(4, "little") + b"WAVE")
    done = byoa_skills(
        engine_home,
        "transcribe",
        "--json",
        "--model",
        "tiny.en",
        str(SPEECH / "jfk.wav"),
        str(stereo),
        str(SPEECH / "silence-1s.wav"),
    )
    assert done.returncode == 1, done.stderr
    jfk, broken, silence = (json.loads(line) for line in done.stdout.splitlines())
    said = "And so my fellow Americans, ask not what your country can do for you"
    assert jfk["ok"] and word_recall(said, jfk["text"]) >= 0.9
    assert (broken["ok"], broken["code"]) == (False, "missing-fmt")
    assert (silence["ok"], silence["text"]) == (True, "")


def test_transcribe_russian_with_base(engine_home: Path) -> None:
    done = byoa_skills(engine_home, "transcribe", "--language", "ru", str(SPEECH / "ru-thanks.wav"))
    assert done.returncode == 0, done.stderr
    assert "спасибо" in done.stdout.lower()


def test_transcribe_refuses_a_language_the_model_cannot_do(engine_home: Path) -> None:
    done = byoa_skills(
        engine_home, "transcribe", "--model", "tiny.en", "--language", "ru", str(SPEECH / "jfk.wav")
    )
    assert done.returncode == 2
    assert "unsupported-language" in done.stderr


def test_a_missing_model_says_how_to_get_it(tmp_path: Path) -> None:
    env_home = tmp_path / "empty-home"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "byoa_skills",
            "transcribe",
            "--model",
            "base",
            "--model-dir",
            str(tmp_path / "nowhere"),
            str(SPEECH / "jfk.wav"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "BYOA_SKILLS_HOME": str(env_home)},
    )
    assert done.returncode == 1
    assert "model-missing" in done.stderr


def test_models_list_shows_the_catalog(engine_home: Path) -> None:
    done = byoa_skills(engine_home, "models", "list", "--json")
    assert done.returncode == 0, done.stderr
    names = {entry["name"] for entry in json.loads(done.stdout)}
    assert {"base", "tiny.en"} <= names


def test_serve_help_explains_readiness_and_draining() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "byoa_skills", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    text = " ".join(done.stdout.split())
    assert done.returncode == 0
    assert "GET /ready answers 200 once every worker is warm" in text
    assert "SIGTERM or Ctrl-C drains" in text


def test_device_auto_falls_back_to_the_cpu_without_a_gpu() -> None:
    import ctranslate2

    from byoa_skills.commands.common import resolve_device

    expected = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
    assert resolve_device("auto") == expected
    assert resolve_device("cpu") == "cpu"


def test_transcribe_refuses_max_minutes_that_are_not_finite(engine_home: Path) -> None:
    for value in ("inf", "1e400", "nan", "0"):
        done = byoa_skills(
            engine_home, "transcribe", "--max-minutes", value, str(SPEECH / "jfk.wav")
        )
        assert done.returncode == 2, (value, done.stderr)
        assert "--max-minutes" in done.stderr and "Traceback" not in done.stderr


#: Runs a command and prints, last on stderr, the peak resident memory of it (KiB).
PEAK_OF = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:])\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(done.returncode)\n"
)


def test_transcribe_takes_a_silent_hour_without_holding_it(
    engine_home: Path, tmp_path: Path
) -> None:
    flac = tmp_path / "silent.flac"
    subprocess.run(
        ["sox", "-D", "-n", "-r", "16000", "-c", "1", "-b", "16", str(flac), "trim", "0", "3540"],
        check=True,
    )
    command = [
        sys.executable,
        "-c",
        PEAK_OF,
        sys.executable,
        "-m",
        "byoa_skills",
        "transcribe",
        "--json",
        "--model",
        "tiny.en",
        str(flac),
    ]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "BYOA_SKILLS_HOME": str(engine_home)},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["ok"], report["text"], report["seconds"]) == (True, "", 3540.0)
    peak_mib = int(done.stderr.strip().splitlines()[-1]) / 1024
    # generous: decoding the hour whole took the command past 1.2 GB
    assert peak_mib < 700, f"transcribe peaked at {peak_mib:.0f} MiB"


def test_ctrl_c_stops_transcribe_with_one_line_and_status_130(
    engine_home: Path, tmp_path: Path
) -> None:
    long = tmp_path / "long.wav"  # 7.5 minutes of speech: still decoding when stopped
    subprocess.run(["sox", str(SPEECH / "jfk.wav"), str(long), "repeat", "40"], check=True)
    fifo = tmp_path / "recording.wav"  # read through a pipe: once written, it is decoding
    os.mkfifo(fifo)
    running = subprocess.Popen(
        [sys.executable, "-m", "byoa_skills", "transcribe", "--model", "tiny.en", str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BYOA_SKILLS_HOME": str(engine_home)},
        # as from a terminal, whatever this process inherited (a background start ignores it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        with fifo.open("wb") as pipe:
            pipe.write(long.read_bytes())
        running.send_signal(signal.SIGINT)
        _out, err = running.communicate(timeout=60)
    finally:
        running.kill()
    assert running.returncode == 130, err
    said = [line for line in err.strip().splitlines() if "int8-encoder-building" not in line]
    assert "Traceback" not in err and said == ["byoa-skills transcribe: stopped"], err
