"""A worker loads what answering takes: not the command line's other commands (the API
server, the wallet), which the ``byoa-skills`` script would bring into every worker it spawns,
and, where its encoder is OpenVINO, not PyAV, which faster-whisper imports to read audio files
a worker is never given."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from engine import TOKEN, Engine, call_http
from speech import skill_input

SPEECH = Path(__file__).parent / "data" / "speech"
TINY_WORKER = ["--model", "tiny.en", "--workers", "1", "--idle-release", "0"]


def _mapped(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_a_worker_of_the_byoa_skills_command_maps_no_api_server_and_no_pyav(
    engine_home: Path,
) -> None:
    script = Path(sys.executable).with_name("byoa-skills")
    assert script.is_file(), "the byoa-skills script is installed beside this Python"
    engine = Engine.start(
        engine_home,
        [*TINY_WORKER, "--encoder-backend", "openvino-f32"],  # any CPU runs it
        token=TOKEN,
        log_name="worker-imports.log",
        program=[str(script)],
    )
    try:
        engine.wait_ready()
        pids = engine.ready()[1]
        body = {"input": skill_input("jfk.wav"), "params": {"language": "en"}}
        status, answer = asyncio.run(call_http(engine, "audio.transcribe", body))
        maps = {pid: _mapped(pid) for pid in pids}
        encoder = engine.health().get("encoder")
    finally:
        engine.stop()
    assert status == 200 and answer["ok"] and "country" in answer["output"]["text"].lower()
    assert len(maps) == 1 and encoder == "openvino-f32"
    for text in maps.values():
        assert "libctranslate2" in text  # the worker's own model runtime is there
        assert "aiohttp" not in text  # the API server is the parent's
        assert "libavcodec" not in text  # PyAV: no audio file is read here


def test_pyav_stands_in_until_used_and_then_reads_files_as_before() -> None:
    probe = """
import json, sys
from byoa_skills.pool.worker_main import defer_audio_file_decoder
defer_audio_file_decoder()
import faster_whisper
before = "libavcodec" in open("/proc/self/maps").read()
import av.error
samples = faster_whisper.decode_audio(sys.argv[1])
after = "libavcodec" in open("/proc/self/maps").read()
print(json.dumps([before, after, samples.shape[0], float(abs(samples).sum()),
                  av.error.InvalidDataError.__name__]))
"""
    plain = """
import json, sys, faster_whisper
samples = faster_whisper.decode_audio(sys.argv[1])
print(json.dumps([samples.shape[0], float(abs(samples).sum())]))
"""
    jfk = str(SPEECH / "jfk.wav")
    deferred = _run(probe, jfk)
    assert deferred[:2] == [False, True]  # loaded only when first used
    assert deferred[2:4] == _run(plain, jfk)  # the same samples as with PyAV imported at once
    assert deferred[4] == "InvalidDataError"


def _run(code: str, *args: str) -> list[object]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return list(json.loads(done.stdout))
