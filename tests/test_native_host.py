"""The native host without a browser: its framing (native byte order, at most 1 MB to the
browser, inputs bounded, a bad message ends it with a log line), nothing but answers on
stdout, null when no engine runs, and an engine the host starts itself for a request,
answered once its models are warm."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from engine import TOKEN, Engine, free_port
from speech import SPEECH

from byoa_skills.consent.scope import Scope
from byoa_skills.demos.site.manifest import GEO_MANIFEST
from byoa_skills.extension.framing import (
    MAX_FROM_BROWSER,
    MAX_TO_BROWSER,
    FramingError,
    MessageTooLarge,
    encode_message,
    read_message,
)
from byoa_skills.extension.host import EngineStarter, NativeHost
from byoa_skills.extension.install import extension_dir, extension_id, hosts_dir, install
from byoa_skills.store.allowed_scopes import AllowedScopes
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.sites import SiteStore

NORWAY = base64.b64encode((SPEECH / "country-norway.wav").read_bytes()).decode()
PAGE = "https://geo.example.org"


def framed(message: Any) -> bytes:
    body = json.dumps(message).encode()
    return struct.pack("=I", len(body)) + body


def answers(stdout: bytes) -> list[dict[str, Any]]:
    """Every framed message in ``stdout``; fails on anything else in it."""
    found, at = [], 0
    while at < len(stdout):
        (length,) = struct.unpack("=I", stdout[at : at + 4])
        found.append(json.loads(stdout[at + 4 : at + 4 + length]))
        at += 4 + length
    assert at == len(stdout)
    return found


def host_env(home: Path) -> dict[str, str]:
    return {**os.environ, "BYOA_SKILLS_HOME": str(home), "BYOA_SKILLS_TOKEN": TOKEN}


def run_host(home: Path, stdin: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The host as the browser starts it, fed ``stdin`` whole, until it ends."""
    command = [sys.executable, "-m", "byoa_skills", "native-host", *args, "chrome-extension://abc/"]
    return subprocess.run(
        command, input=stdin, capture_output=True, env=host_env(home), timeout=60, check=False
    )


# -- framing ---------------------------------------------------------------------------------


def test_a_message_is_a_native_order_length_and_utf8_json() -> None:
    framed_message = encode_message({"id": 1, "text": "Slovenčina"})
    body = json.dumps(
        {"id": 1, "text": "Slovenčina"}, ensure_ascii=False, separators=(",", ":")
    ).encode()
    assert framed_message == struct.pack("=I", len(body)) + body
    assert read_message(io.BytesIO(framed_message)) == {"id": 1, "text": "Slovenčina"}
    assert read_message(io.BytesIO(b"")) is None  # the browser closed the pipe


def test_a_message_over_1_mb_is_never_encoded() -> None:
    with pytest.raises(MessageTooLarge):
        encode_message({"id": 1, "ok": True, "output": {"text": "x" * MAX_TO_BROWSER}})


def test_the_host_finds_the_running_engine_where_its_record_says(engine: Engine) -> None:
    # installed for one port, while the visitor's engine listens on another
    ahead = framed({"id": 1, "type": "release", "origin": PAGE, "grantId": "g"})
    done = run_host(engine.home, ahead, f"--port={free_port()}", "--no-start")
    assert done.returncode == 0, done.stderr
    assert f"event=host-engine url={engine.url} found=running".encode() in done.stderr


@pytest.mark.parametrize(
    ("stream", "code"),
    [
        (struct.pack("=I", MAX_FROM_BROWSER + 1), "message-too-large"),
        (struct.pack("=I", 10) + b"{}", "truncated"),
        (b"\x01\x00", "truncated"),
        (struct.pack("=I", 5) + b"nope!", "not-json"),
        (struct.pack("=I", 2) + b"\xff\xfe", "not-json"),
        (struct.pack("=I", 2) + b"[]", "bad-request"),
    ],
    ids=["oversized", "short-body", "short-length", "not-json", "not-utf8", "not-an-object"],
)
def test_a_message_that_breaks_the_framing_is_refused(stream: bytes, code: str) -> None:
    with pytest.raises(FramingError) as refused:
        read_message(io.BytesIO(stream))
    assert refused.value.code == code


def test_an_answer_over_1_mb_is_replaced_by_the_pages_no() -> None:
    host = NativeHost("http://127.0.0.1:9", TOKEN, EngineStarter(None, Path("unused.log")))
    out = io.BytesIO()
    host._write(out, {"id": 7, "ok": True, "output": {"text": "x" * MAX_TO_BROWSER}}, "call")
    assert answers(out.getvalue()) == [{"ok": False, "id": 7}]


# -- the host as a process -------------------------------------------------------------------


def test_with_no_engine_every_answer_is_the_pages_no_and_stdout_holds_only_answers(
    tmp_path: Path,
) -> None:
    port = free_port()
    messages = [
        {
            "id": 1,
            "type": "request",
            "origin": PAGE,
            "manifest": GEO_MANIFEST,
            "userActivation": True,
        },
        {"id": "two", "type": "call", "origin": PAGE, "grantId": "g", "skill": "audio.transcribe"},
        {"id": 3, "type": "release", "origin": PAGE, "grantId": "g"},
        {"id": 4, "type": "something-else"},
    ]
    done = run_host(tmp_path, b"".join(map(framed, messages)), f"--port={port}", "--no-start")
    assert done.returncode == 0, done.stderr
    got = sorted(answers(done.stdout), key=lambda answer: str(answer["id"]))
    assert got == [
        {"grant": None, "id": 1},
        {"ok": False, "id": 3},
        {"ok": False, "id": 4},
        {"ok": False, "id": "two"},
    ]
    assert b"event=host-browser-gone" in done.stderr


@pytest.mark.parametrize(
    ("stream", "code"),
    [
        (struct.pack("=I", MAX_FROM_BROWSER + 1) + b"{", "message-too-large"),
        (struct.pack("=I", 3) + b"{x}", "not-json"),
        (struct.pack("=I", 100) + b"{}", "truncated"),
    ],
    ids=["oversized", "malformed", "truncated"],
)
def test_a_bad_message_ends_the_host_cleanly_with_a_log_line(
    tmp_path: Path, stream: bytes, code: str
) -> None:
    ahead = framed({"id": 1, "type": "release", "origin": PAGE, "grantId": "g"})
    done = run_host(tmp_path, ahead + stream, f"--port={free_port()}", "--no-start")
    assert done.returncode == 1
    assert f"event=host-message-refused code={code}".encode() in done.stderr
    assert b"Traceback" not in done.stderr
    assert all(set(answer) <= {"id", "ok"} for answer in answers(done.stdout))


# -- an engine the host starts ---------------------------------------------------------------


@pytest.mark.slow
def test_the_host_starts_the_engine_and_answers_once_it_is_warm(
    engine_home: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")
    site = "https://started.example.org"
    database = WalletDatabase(home / "data" / "wallet.sqlite3")
    # as an earlier "Allow and decide on my own" of this manifest left it
    AllowedScopes(database).keep(site, Scope.of(GEO_MANIFEST).to_json()).result()
    SiteStore(database).set_decide_on_my_own(site, True)
    database.close()
    port = free_port()
    request = {
        "id": 1,
        "type": "request",
        "origin": site,
        "manifest": GEO_MANIFEST,
        "userActivation": False,
    }
    command = [
        sys.executable,
        "-m",
        "byoa_skills",
        "native-host",
        f"--port={port}",
        "--serve-arg=--model",
        "--serve-arg=tiny.en",
        "--serve-arg=--workers",
        "--serve-arg=1",
    ]
    host = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=host_env(home),
    )
    engine_pid = None
    try:
        assert host.stdin is not None and host.stdout is not None
        host.stdin.write(framed(request))
        host.stdin.flush()
        got = read_message(host.stdout)
        assert got is not None and got["id"] == 1 and got["grant"] is not None, got
        call = {
            "id": 2,
            "type": "call",
            "origin": site,
            "grantId": got["grant"]["grantId"],
            "skill": "audio.transcribe",
            "params": {"language": "en"},
            "input": {"audio": {"mime": "audio/wav", "base64": NORWAY}},
        }
        host.stdin.write(framed(call))
        host.stdin.flush()
        answer = read_message(host.stdout)
        assert answer is not None and answer["ok"] is True, answer
        assert "norway" in answer["output"]["text"].lower()
        host.stdin.close()
        assert host.wait(timeout=30) == 0
    finally:
        if host.poll() is None:
            host.kill()
        log = host.stderr.read().decode() if host.stderr else ""
        found = re.search(r"event=engine-started pid=(\d+)", log)
        engine_pid = int(found.group(1)) if found else None
        if engine_pid:
            os.kill(engine_pid, signal.SIGTERM)
            _wait_gone(engine_pid)
    assert engine_pid is not None, log


def _wait_gone(pid: int) -> None:
    for _ in range(600):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


# -- install ---------------------------------------------------------------------------------


def test_install_writes_a_manifest_for_the_fixed_id_and_a_wrapper_that_runs_the_host(
    tmp_path: Path,
) -> None:
    profile = tmp_path / "profile"
    env = {**os.environ, "BYOA_SKILLS_HOME": str(tmp_path / "home")}
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "byoa_skills",
            "extension",
            "install",
            "--browser",
            "chromium",
            "--user-data-dir",
            str(profile),
            "--port",
            "9911",
            "--no-start",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    folder = hosts_dir("chromium", profile)
    manifest = json.loads((folder / "org.bringyourownagent.wallet.json").read_text())
    wrapper = Path(manifest["path"])
    assert manifest["name"] == "org.bringyourownagent.wallet" and manifest["type"] == "stdio"
    assert manifest["allowed_origins"] == [f"chrome-extension://{extension_id()}/"]
    assert re.fullmatch("[a-p]{32}", extension_id())
    assert wrapper.parent == folder and os.access(wrapper, os.X_OK)
    script = wrapper.read_text()
    assert "native-host --port=9911 --no-start" in script and str(tmp_path / "home") in script
    assert str(extension_dir()) in shown.stdout and extension_id() in shown.stdout
    # the wrapper runs the host: no engine on that port, so the request gets null
    done = subprocess.run(
        [str(wrapper)],
        input=framed({"id": 1, "type": "request"}),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert answers(done.stdout) == [{"grant": None, "id": 1}]
    removed = subprocess.run(
        [
            sys.executable,
            "-m",
            "byoa_skills",
            "extension",
            "uninstall",
            "--user-data-dir",
            str(profile),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "removed" in removed.stdout and list(folder.iterdir()) == []


def test_install_in_the_users_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(sys, "platform", "linux")
    files = install(hosts_dir("chrome"), 8787, True, [])
    assert files.manifest == tmp_path / "config/google-chrome/NativeMessagingHosts" / (
        "org.bringyourownagent.wallet.json"
    )
    assert hosts_dir("chromium") == tmp_path / "config/chromium/NativeMessagingHosts"
