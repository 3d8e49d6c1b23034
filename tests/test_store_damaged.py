"""A real ``serve`` started on a wallet store it cannot use (random bytes, a file cut short, a
folder or a link in its place, a folder every user may write, a read-only disk, a
``sites.json`` to import nested too deep) stays up: ``/health`` and the wallet page say what
is wrong, every site is refused ``site-unreadable``, the visitor's own calls work. Hostile
legacy JSON is skipped, never a crash. On a full disk a pause or a block is in force at once
and written once there is room."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from engine import TOKEN, Engine, call_http, start_engine
from grants import GEO_MANIFEST, grant
from speech import SPEECH, skill_input, word_recall
from test_link_intake import make_link

from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.problems import STORE_CODES
from byoa_skills.store.sites import SiteStore

ROOT = Path(__file__).resolve().parent.parent
HELLO = SPEECH / "en-hello.wav"
SITE = "https://geo.example.org"
OTHER = "https://quiz.example.org"
IS_ROOT = hasattr(os, "getuid") and os.getuid() == 0


# -- the damaged states ----------------------------------------------------------------------


def sound_database(path: Path) -> None:
    """A database as the engine writes it: a blocked site and some activity, closed cleanly."""
    database = WalletDatabase(path)
    SiteStore(database).block("https://blocked.example.org")
    log = ActivityLog(database)
    for number in range(300):
        log.record({"kind": "call", "origin": SITE, "outcome": "ok", "latencyMs": number})
    database.flush()
    database.close()


def mount(folder: Path, options: str) -> bool:
    """Mount a tmpfs on ``folder``; whether it could be (it needs root)."""
    if not IS_ROOT or shutil.which("mount") is None:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True
    )
    return done.returncode == 0


def unmount(folder: Path) -> None:
    """Unmount ``folder`` (lazily if something still holds it)."""
    if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def random_bytes(data: Path) -> Callable[[], None] | None:
    (data / "wallet.sqlite3").write_bytes(os.urandom(20_000))
    return None


def truncated(data: Path) -> Callable[[], None] | None:
    path = data / "wallet.sqlite3"
    sound_database(path)
    assert not (data / "wallet.sqlite3-wal").exists()
    os.truncate(path, path.stat().st_size // 2)
    return None


def directory(data: Path) -> Callable[[], None] | None:
    (data / "wallet.sqlite3").mkdir()
    return None


def symlink(data: Path) -> Callable[[], None] | None:
    elsewhere = data.parent / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    sound_database(elsewhere / "wallet.sqlite3")
    (data / "wallet.sqlite3").symlink_to(elsewhere / "wallet.sqlite3")
    return None


def folder_0777(data: Path) -> Callable[[], None] | None:
    sound_database(data / "wallet.sqlite3")
    data.chmod(0o777)
    return lambda: data.chmod(0o700)


def read_only(data: Path) -> Callable[[], None] | None:
    if IS_ROOT:  # root writes through a folder's mode: a read-only disk it is
        if not mount(data, "size=4m,mode=0700"):
            pytest.skip("a read-only disk needs a tmpfs mount, refused here")
        sound_database(data / "wallet.sqlite3")
        subprocess.run(["mount", "-o", "remount,ro", str(data)], check=True)
        return lambda: unmount(data)
    sound_database(data / "wallet.sqlite3")
    data.chmod(0o500)
    return lambda: data.chmod(0o700)


def sites_json_too_deep(data: Path) -> Callable[[], None] | None:
    (data / "sites.json").write_text("[" * 100_000)
    return None


#: Each damaged state, what it makes in the data folder, and the code /health gives.
STATES: dict[str, tuple[Callable[[Path], Callable[[], None] | None], str]] = {
    "random-bytes": (random_bytes, "store-damaged"),
    "truncated": (truncated, "store-damaged"),
    "directory": (directory, "store-unsafe"),
    "symlink": (symlink, "store-unsafe"),
    "folder-0777": (folder_0777, "store-unsafe"),
    "read-only": (read_only, "store-read-only"),
    "sites-json-too-deep": (sites_json_too_deep, "store-damaged"),
}


def home_with_models(engine_home: Path, home: Path) -> Path:
    (home / "cache").mkdir(parents=True)
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")
    (home / "data").mkdir(mode=0o700)
    return home


@pytest.fixture(scope="module", params=list(STATES))
def damaged(
    request: pytest.FixtureRequest, engine_home: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Engine, str]]:
    """A warm ``serve`` (tiny.en, one worker) started on one damaged store, and the code
    ``/health`` is to give."""
    make, code = STATES[request.param]
    home = home_with_models(engine_home, tmp_path_factory.mktemp(f"damaged-{request.param}"))
    undo = make(home / "data")
    running = start_engine(home, "--model", "tiny.en", "--workers", "1")
    try:
        running.wait_ready()
        time.sleep(0.5)  # past the start's last steps (the kept pairings) after /ready
        yield running, code
    finally:
        running.stop()
        if undo is not None:
            undo()


# -- clients ---------------------------------------------------------------------------------


async def api(engine: Engine, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, engine.url + path, json=body, headers=headers) as response,
    ):
        return response.status, await response.json(content_type=None)


async def wallet_api(engine: Engine, calls: list[tuple[str, str, Any]]) -> list[tuple[int, Any]]:
    """Sign in to the wallet page's API with a fresh ticket, then make ``calls`` (method,
    path, body) with its cookie and origin."""
    _, ticket = await api(engine, "POST", "/v1/wallet/tickets")
    origin = engine.url
    answers = []
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        code = ticket["url"].split("#ticket=", 1)[1]
        signed = await session.post(
            f"{origin}/wallet/api/session", headers={"Origin": origin}, json={"ticket": code}
        )
        assert signed.status == 200
        for method, path, body in calls:
            async with session.request(
                method, origin + path, json=body, headers={"Origin": origin}
            ) as response:
                answers.append((response.status, await response.json(content_type=None)))
    return answers


def health(engine: Engine) -> dict[str, Any]:
    status, body = engine.get("/health", token=None)
    assert status == 200, body
    return dict(json.loads(body))


def transcribe_over_openai(engine: Engine) -> tuple[int, str]:
    async def main() -> tuple[int, str]:
        form = aiohttp.FormData()
        form.add_field("model", "whisper-1")
        form.add_field("file", HELLO.read_bytes(), filename="hello.wav", content_type="audio/wav")
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{engine.url}/v1/audio/transcriptions", data=form, headers=headers
            ) as response,
        ):
            return response.status, (await response.json()).get("text", "")

    return asyncio.run(main())


# -- a damaged store at start ----------------------------------------------------------------


def test_serve_stays_up_and_health_says_what_is_wrong(damaged: tuple[Engine, str]) -> None:
    engine, code = damaged
    shown = health(engine)
    assert shown["ok"] is True and shown["status"] == "degraded"
    assert shown["store"]["ok"] is False and shown["store"]["code"] == code
    assert shown["store"]["message"]
    assert engine.process.poll() is None


def test_every_site_is_refused_site_unreadable(damaged: tuple[Engine, str]) -> None:
    engine, _ = damaged

    async def main() -> list[tuple[int, Any]]:
        return [
            await api(
                engine,
                "POST",
                "/v1/grants",
                {"origin": SITE, "manifest": GEO_MANIFEST, "grant": grant()},
            ),
            await api(engine, "POST", "/v1/links", {"link": make_link(9), "decision": "allow"}),
            await api(
                engine,
                "POST",
                "/v1/extension/request",
                {"origin": SITE, "manifest": GEO_MANIFEST, "userActivation": True},
            ),
        ]

    (grant_status, granted), (link_status, linked), (asked_status, asked) = asyncio.run(main())
    assert (grant_status, granted["code"]) == (403, "site-unreadable")
    assert (link_status, linked["code"]) == (403, "site-unreadable")
    assert (asked_status, asked) == (200, {"grant": None})  # a page sees only null
    log = engine.log.read_text(errors="replace")
    assert "event=store-unreadable" in log or "event=site-list-unreadable" in log
    assert engine.process.poll() is None


def test_the_visitors_own_calls_work(damaged: tuple[Engine, str]) -> None:
    engine, _ = damaged
    hello = {"input": skill_input("en-hello.wav"), "params": {"language": "en"}}
    status, answer = asyncio.run(call_http(engine, "audio.transcribe", hello))
    assert status == 200 and word_recall("Hello world.", answer["output"]["text"]) >= 0.5
    status, text = transcribe_over_openai(engine)
    assert status == 200 and word_recall("Hello world.", text) >= 0.5
    assert engine.process.poll() is None


def test_the_wallet_page_shows_the_store_problem(damaged: tuple[Engine, str]) -> None:
    engine, code = damaged
    paths = ["/wallet/api/engine", "/wallet/api/engine?only=store", "/wallet/api/sites"]
    answers = asyncio.run(wallet_api(engine, [("GET", path, None) for path in paths]))
    (view_status, view), (store_status, store), (sites_status, _) = answers
    assert view_status == 200 and view["store"]["code"] == code and "speech" in view
    assert store_status == 200 and store == {"ok": True, "store": view["store"]}
    assert sites_status == 503  # the list cannot be read: never shown as empty


def test_the_cli_transcribes_with_the_store_damaged(engine_home: Path, tmp_path: Path) -> None:
    home = home_with_models(engine_home, tmp_path / "home")
    random_bytes(home / "data")
    running = start_engine(home, "--model", "tiny.en", "--workers", "1")
    try:
        running.wait_ready()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "byoa_skills",
                "transcribe",
                "--model",
                "tiny.en",
                "--language",
                "en",
                str(HELLO),
            ],
            env={**os.environ, "BYOA_SKILLS_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert word_recall("Hello world.", done.stdout) >= 0.5
        assert health(running)["store"]["code"] == "store-damaged"
    finally:
        running.stop()


def test_the_banner_shows_on_the_wallet_page(engine_home: Path, tmp_path: Path) -> None:
    from test_wallet_page import CHROMIUM, wallet_page

    if not CHROMIUM:
        pytest.skip("headless Chromium is needed (scripts/bootstrap.sh dev installs it)")
    home = home_with_models(engine_home, tmp_path / "home")
    random_bytes(home / "data")
    running = start_engine(home, "--model", "tiny.en", "--workers", "1")

    async def main() -> str:
        async with wallet_page(running) as page:
            await page.wait_for_selector("#store-banner:not([hidden])", timeout=20_000)
            return await page.text_content("#store-banner") or ""

    try:
        running.wait_ready()
        banner = asyncio.run(main())
    finally:
        running.stop()
    assert "store-damaged" in banner and "Every site is refused" in banner


def test_every_store_code_is_documented() -> None:
    text = (ROOT / "docs" / "activity-and-sites.md").read_text()
    for code in STORE_CODES:
        assert f"| `{code}` |" in text, code


# -- hostile legacy JSON ---------------------------------------------------------------------


def test_hostile_legacy_json_is_skipped_and_counted(engine_home: Path, tmp_path: Path) -> None:
    home = home_with_models(engine_home, tmp_path / "home")
    data = home / "data"
    (data / "recent-codes.json").write_text(
        '{"inf": Infinity, "nan": NaN, "big": 1e30, "minus": -Infinity, "fine": 1790000000}'
    )
    (data / "pairings.json").write_text(
        '{"https://p.example.org": {"link": "bringyourownagent://x", "pairing": NaN}}'
    )
    (data / "sites.json").write_text(
        json.dumps(
            {
                "version": 1,
                "sites": {
                    SITE: {"state": "blocked", "since": "2026-11-01T00:00:00Z", "firstSeen": "x"}
                },
            }
        ).replace('"x"', "NaN")
    )
    (data / "activity").mkdir()
    (data / "activity" / "activity.jsonl").write_text(
        '{"time":"2026-11-01T00:00:00.000Z","kind":"call","latencyMs":NaN}\n'
        '{"time":"2026-11-01T00:00:01.000Z","kind":"call","outcome":"ok"}\n'
        '{"time":"2026-11-01T00:00:02.000Z","kind":"call","cost":1e400}\n'
        '{"time":"2026-11-01T00:00:03.000Z","kind":"call","outcome":"ok","x":' + "[" * 50_000 + "\n"
    )
    running = start_engine(home, "--model", "tiny.en", "--workers", "1")
    try:
        running.wait_ready()
        shown = health(running)

        async def main() -> list[tuple[int, Any]]:
            return [
                await api(
                    running,
                    "POST",
                    "/v1/grants",
                    {"origin": origin, "manifest": GEO_MANIFEST, "grant": grant()},
                )
                for origin in (SITE, OTHER)
            ]

        (blocked_status, blocked), (other_status, _) = asyncio.run(main())
    finally:
        running.stop()
    assert shown["status"] == "ok" and shown["store"] == {"ok": True, "pendingChanges": 0}
    assert (blocked_status, blocked["code"]) == (403, "site-blocked")  # the import kept it
    assert other_status == 200
    with contextlib.closing(sqlite3.connect(data / "wallet.sqlite3")) as db:
        codes = db.execute("SELECT seen_ms FROM recent_codes").fetchall()
        entries = db.execute(
            'SELECT entry FROM activity WHERE entry LIKE \'{"time":"2026-11-01%\''
        ).fetchall()
        pairings = db.execute("SELECT count(*) FROM link_pairings").fetchone()[0]
    assert codes == [(1_790_000_000_000,)]
    assert [json.loads(entry)["time"] for (entry,) in entries] == ["2026-11-01T00:00:01.000Z"]
    assert pairings == 0
    log = running.log.read_text(errors="replace")
    assert "event=import-skipped file=recent-codes.json entries=4" in log
    assert "event=import-skipped file=pairings.json entries=1" in log
    assert "event=import-skipped file=activity lines=3" in log


# -- a full disk -----------------------------------------------------------------------------


def fill(folder: Path) -> Path:
    """A file that takes every byte left on ``folder``'s disk."""
    filler = folder / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as file:
        while True:
            file.write(b"\0" * 512)
            file.flush()
    return filler


def test_a_block_on_a_full_disk_is_in_force_at_once_and_written_later(
    engine_home: Path, tmp_path: Path
) -> None:
    home = home_with_models(engine_home, tmp_path / "home")
    data = home / "data"
    if not mount(data, "size=400k,mode=0700"):
        pytest.skip("a full disk is a 400 kB tmpfs here, and mounting one needs root")
    other_files = data / "other-files"  # what the visitor deletes to make room
    other_files.write_bytes(b"\0" * 96 * 1024)
    running = start_engine(home, "--model", "tiny.en", "--workers", "1")
    hello = {"input": skill_input("en-hello.wav"), "params": {"language": "en"}}

    async def before() -> tuple[str, str]:
        ids = []
        for origin in (SITE, OTHER):
            status, answer = await api(
                running,
                "POST",
                "/v1/grants",
                {"origin": origin, "manifest": GEO_MANIFEST, "grant": grant()},
            )
            assert status == 200, answer
            ids.append(answer["grantId"])
        for _ in range(3):  # activity, committed before the disk is full
            status, _ = await call_http(running, "audio.transcribe", {"grantId": ids[0], **hello})
            assert status == 200
        return ids[0], ids[1]

    async def while_full(blocked: str, paused: str) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        seen["block"], seen["pause"], seen["sites"] = await wallet_api(
            running,
            [
                ("POST", "/wallet/api/sites", {"origin": SITE, "action": "block"}),
                ("POST", "/wallet/api/sites", {"origin": OTHER, "action": "pause"}),
                ("GET", "/wallet/api/sites", None),
            ],
        )
        seen["blocked call"] = await call_http(
            running, "audio.transcribe", {"grantId": blocked, **hello}
        )
        seen["blocked grant"] = await api(
            running,
            "POST",
            "/v1/grants",
            {"origin": SITE, "manifest": GEO_MANIFEST, "grant": grant()},
        )
        seen["paused call"] = await call_http(
            running, "audio.transcribe", {"grantId": paused, **hello}
        )
        seen["own call"] = await call_http(running, "audio.transcribe", hello)
        return seen

    try:
        running.wait_ready()
        blocked, paused = asyncio.run(before())
        running.activity_once(lambda entries: len(entries) >= 5)
        assert health(running).get("status", "ok") == "ok"  # room left until now
        filler = fill(data)
        seen = asyncio.run(while_full(blocked, paused))
        full = health(running)
        filler.unlink()
        other_files.unlink()
        limit = time.monotonic() + 60
        while (later := health(running)).get("status", "ok") != "ok" and time.monotonic() < limit:
            time.sleep(0.2)
        with contextlib.closing(sqlite3.connect(data / "wallet.sqlite3")) as db:
            written = dict(db.execute("SELECT origin, state FROM sites").fetchall())
        after = asyncio.run(
            api(
                running,
                "POST",
                "/v1/grants",
                {"origin": SITE, "manifest": GEO_MANIFEST, "grant": grant()},
            )
        )
    finally:
        running.stop()
        unmount(data)
    (block_status, block), (pause_status, pause) = seen["block"], seen["pause"]
    assert block_status == 200 and block["ok"] is True and block["pending"] is True
    assert "disk is full" in block["message"]
    assert pause_status == 200 and pause["pending"] is True
    sites = {site["origin"]: site for site in seen["sites"][1]["sites"]}
    assert (sites[SITE]["state"], sites[SITE]["pending"]) == ("blocked", True)
    assert (sites[OTHER]["state"], sites[OTHER]["pending"]) == ("paused", True)
    # in force and told at once, as on a disk that takes it: its grants ended (the site hears
    # bye), and it gets no other
    assert (seen["blocked call"][0], seen["blocked call"][1]["code"]) == (404, "unknown-grant")
    assert (seen["blocked grant"][0], seen["blocked grant"][1]["code"]) == (403, "site-blocked")
    assert (seen["paused call"][0], seen["paused call"][1]["code"]) == (403, "site-paused")
    assert seen["own call"][0] == 200
    assert full["status"] == "degraded"
    assert full["store"]["code"] == "store-full" and full["store"]["pendingChanges"] == 2
    assert later.pop("encoder") and later.pop("encoderPrecision")  # the speech workers' encoder
    assert later.pop("ct2Kernels")  # and the kernels they decode with
    assert later.pop("vad") in ("openvino", "onnxruntime")  # and what runs their VAD
    assert later.pop("pid") > 0  # the engine's process
    assert later == {"ok": True, "status": "ok", "store": {"ok": True, "pendingChanges": 0}}
    assert written[SITE] == "blocked" and written[OTHER] == "paused"
    assert (after[0], after[1]["code"]) == (403, "site-blocked")
