"""The direct link end to end on loopback: the reference site, the real engine (a `serve`
process with the developer switch), real WebSockets and real speech."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
from engine import TOKEN, Engine, free_port, start_engine
from sitekit import until, with_site
from speech import SPEECH

from byoa_skills.demos.site.demo import SiteDemo
from byoa_skills.demos.site.manifest import build_link
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.database import WalletDatabase
from byoa_skills.store.link_pairings import PairingStore
from byoa_skills.store.sites import SiteStore

NORWAY = (SPEECH / "country-norway.wav").read_bytes()
JFK = (SPEECH / "jfk.wav").read_bytes()


async def take_link(engine: Engine, link: str, decision: str = "allow") -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{engine.url}/v1/links", json={"link": link, "decision": decision}, headers=headers
        ) as response,
    ):
        return await response.json()


def test_a_spoken_country_comes_back_as_text(engine: Engine) -> None:
    async def body(demo: SiteDemo) -> tuple[dict[str, Any], list[str | None], str]:
        session, link = demo.new_code("127.0.0.1")
        answer = await take_link(engine, link)
        texts = await asyncio.gather(
            demo.transcribe(session, NORWAY, "en"),
            *(demo.transcribe(session, JFK, "en") for _ in range(2)),  # several in flight
        )
        return answer, list(texts), demo.wait_state(session)

    answer, texts, state = with_site(body)
    assert answer["ok"] and answer["state"] == "connected", answer
    assert state == "connected"
    assert texts[0] is not None and "norway" in texts[0].lower()
    assert all(text and "country" in text.lower() for text in texts[1:])


def test_the_hello_states_the_grant_and_its_limits(engine: Engine) -> None:
    async def body(demo: SiteDemo) -> dict[str, Any]:
        _, link = demo.new_code("127.0.0.1")
        await take_link(engine, link)
        return demo.hellos[-1]

    hello = with_site(body)
    assert hello["type"] == "hello" and hello["v"] == "0.1" and hello["pairing"] is None
    assert hello["grant"]["skills"] == ["audio.transcribe"]
    assert hello["grant"]["limits"]["maxParallelCalls"] == 8
    assert hello["grant"]["limits"]["maxClipSeconds"] == 15


def test_a_manifest_echo_one_byte_off_gets_bye(engine: Engine) -> None:
    async def body(demo: SiteDemo) -> dict[str, Any]:
        last = demo.manifest64[-1]
        demo.welcome_manifest = demo.manifest64[:-1] + ("A" if last != "A" else "B")
        _, link = demo.new_code("127.0.0.1")
        answer = await take_link(engine, link)
        await until(lambda: not demo.connections, "the wallet to leave")
        return answer

    answer = with_site(body)
    assert (answer["ok"], answer["code"]) == (False, "manifest-mismatch")


def test_a_replayed_code_does_nothing(engine: Engine) -> None:
    async def body(demo: SiteDemo) -> tuple[dict[str, Any], dict[str, Any], int]:
        _, link = demo.new_code("127.0.0.1")
        first = await take_link(engine, link)
        again = await take_link(engine, link)
        return first, again, len(demo.hellos)

    first, again, hellos = with_site(body)
    assert first["ok"] and (again["ok"], again["code"]) == (False, "code-seen")
    assert hellos == 1


def test_a_declined_link_makes_no_connection(engine: Engine) -> None:
    async def body(demo: SiteDemo) -> tuple[dict[str, Any], int]:
        _, link = demo.new_code("127.0.0.1")
        answer = await take_link(engine, link, "decline")
        await asyncio.sleep(0.5)  # give a wrong connection time to show up
        return answer, len(demo.hellos)

    answer, hellos = with_site(body)
    assert (answer["ok"], answer["code"]) == (False, "declined")
    assert hellos == 0


def test_decide_on_my_own_comes_back_after_a_drop(engine: Engine) -> None:
    async def body(demo: SiteDemo) -> tuple[list[dict[str, Any]], str, str | None]:
        _, link = demo.new_code("127.0.0.1")
        answer = await take_link(engine, link, "decide-on-my-own")
        assert answer["ok"], answer
        first = demo.connections[0]
        await first.ws.close()  # the site drops the connection
        await until(lambda: len(demo.hellos) == 2 and demo.connections, "the wallet to come back")
        text = await demo.transcribe(first.pairing, NORWAY, "en")
        return demo.hellos, first.pairing, text

    hellos, pairing, text = with_site(body)
    assert (hellos[1]["session"], hellos[1]["pairing"]) == (None, pairing)
    assert text and "norway" in text.lower()


def test_connect_hands_the_link_to_the_running_engine(engine: Engine) -> None:
    async def body(demo: SiteDemo) -> tuple[int, dict[str, Any], str]:
        session, link = demo.new_code("127.0.0.1")
        env = {
            **os.environ,
            "BYOA_SKILLS_HOME": str(engine.home),
            "BYOA_SKILLS_TOKEN": TOKEN,
            "BYOA_WALLET_DEV_LOCAL": "1",
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "byoa_skills",
            "connect",
            link,
            "--allow",
            "--port",
            str(engine.port),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await process.communicate()
        assert b"asks to use your AI" in err and b"audio.transcribe (en, ru, sk)" in err
        return process.returncode or 0, json.loads(out), demo.wait_state(session)

    status, answer, state = with_site(body)
    assert status == 0 and answer["state"] == "connected" and state == "connected"


def test_a_paused_site_is_not_reconnected(engine: Engine) -> None:
    async def body(demo: SiteDemo) -> int:
        _, link = demo.new_code("127.0.0.1")
        answer = await take_link(engine, link, "decide-on-my-own")
        SiteStore(WalletDatabase(engine.home / "data" / "wallet.sqlite3")).pause(answer["origin"])
        await demo.connections[0].ws.close()
        await asyncio.sleep(2.5)  # longer than the test schedule's first waits
        return len(demo.hellos)

    try:
        assert with_site(body) == 1
    finally:
        for site in SiteStore(WalletDatabase(engine.home / "data" / "wallet.sqlite3")).list():
            SiteStore(WalletDatabase(engine.home / "data" / "wallet.sqlite3")).forget(site.origin)


def test_frames_the_wallet_does_not_take(engine: Engine) -> None:
    async def body(demo: SiteDemo) -> tuple[str | None, int | None]:
        session, link = demo.new_code("127.0.0.1")
        await take_link(engine, link)
        connection = demo.connections[0]
        await connection.send({"type": "something-new", "id": 7})  # ignored
        text = await demo.transcribe(session, NORWAY, "en")
        await connection.ws.send_str("not JSON at all")
        await until(lambda: connection.closed, "the wallet to close")
        return text, connection.ws.close_code

    text, close_code = with_site(body)
    assert text and "norway" in text.lower()
    assert close_code == 1007


def test_a_frame_over_4_mb_is_refused(engine: Engine) -> None:
    async def body(demo: SiteDemo) -> tuple[str, int | None]:
        _, link = demo.new_code("127.0.0.1")
        answer = await take_link(engine, link)
        connection = demo.connections[0]
        big = {"type": "call", "id": 1, "skill": "audio.transcribe", "pad": "x" * 4_200_000}
        with contextlib.suppress(ConnectionError):  # the wallet may close while it is sent
            await connection.send(big)
        await until(lambda: connection.closed, "the wallet to close")
        log = ActivityLog(WalletDatabase(engine.home / "data" / "wallet.sqlite3"))
        ended = lambda: any(e["kind"] == "link" for e in log.read(origin=answer["origin"]))  # noqa: E731
        await until(ended, "the session's end in the activity log")
        return answer["origin"], connection.ws.close_code

    origin, close_code = with_site(body)
    # the wallet reads the frame to its end, closes with 1009 and ends the session without
    # answering it (it dropped the socket mid-frame before: the site saw 1006)
    assert close_code == 1009
    log = ActivityLog(WalletDatabase(engine.home / "data" / "wallet.sqlite3"))
    entries = [e for e in log.read(origin=origin) if e["kind"] in ("link", "call")]
    assert [e["kind"] for e in entries] == ["link"] and entries[0]["outcome"] == "too-large"
    said = engine.log.read_text(errors="replace")
    assert f"event=link-closed origin={origin} ending=too-large close_code=" in said


def test_pairings_come_back_after_a_restart(engine_home: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")

    async def body(demo: SiteDemo) -> list[dict[str, Any]]:
        _, link = demo.new_code("127.0.0.1")
        first = start_engine(home, "--model", "tiny.en", "--workers", "1", log_name="a.log")
        try:
            await asyncio.to_thread(first.wait_ready)
            assert (await take_link(first, link, "decide-on-my-own"))["ok"]
        finally:
            await asyncio.to_thread(first.stop)
        await until(lambda: not demo.connections, "the wallet to go away")
        second = start_engine(home, "--model", "tiny.en", "--workers", "1", log_name="b.log")
        try:
            await asyncio.to_thread(second.wait_ready)
            await until(lambda: len(demo.hellos) == 2, "the wallet to come back")
            text = await demo.transcribe(demo.hellos[1]["pairing"], NORWAY, "en")
            assert text is not None
        finally:
            await asyncio.to_thread(second.stop)
        return demo.hellos

    hellos = with_site(body)
    assert hellos[1]["session"] is None and hellos[1]["pairing"]
    database = WalletDatabase(home / "data" / "wallet.sqlite3")
    stored = PairingStore(database).all()
    assert len(stored) == 1 and next(iter(stored)).startswith("http://localhost:")
    assert stat.S_IMODE(database.path.stat().st_mode) == 0o600


def test_connect_starts_an_engine_when_none_runs(engine_home: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "cache").mkdir(parents=True)
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")

    async def body(demo: SiteDemo) -> tuple[str | None, int]:
        session, link = demo.new_code("127.0.0.1")
        env = {
            **os.environ,
            "BYOA_SKILLS_HOME": str(home),
            "BYOA_SKILLS_TOKEN": TOKEN,
            "BYOA_WALLET_DEV_LOCAL": "1",
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "byoa_skills",
            "connect",
            link,
            "--allow",
            "--model",
            "tiny.en",
            "--workers",
            "1",
            "--port",
            str(free_port()),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await until(lambda: demo.wait_state(session) == "connected", "the wallet", 120)
            text = await demo.transcribe(session, NORWAY, "en")
        finally:
            process.terminate()
            status = await process.wait()
        return text, status

    text, status = with_site(body)
    assert text and "norway" in text.lower()
    assert status == 0  # SIGTERM drains and stops cleanly


def test_an_unknown_code_gets_bad_session_and_ends(engine: Engine) -> None:
    async def body(demo: SiteDemo) -> dict[str, Any]:
        link = build_link(demo.endpoint, demo.manifest64, secrets.token_urlsafe(24))
        return await take_link(engine, link, "decide-on-my-own")

    answer = with_site(body)
    assert (answer["ok"], answer["code"]) == (False, "bad-session")
    pairings = PairingStore(WalletDatabase(engine.home / "data" / "wallet.sqlite3"))
    assert answer["origin"] not in pairings.all()


def test_the_sites_bye_ends_the_session(engine: Engine) -> None:
    async def body(demo: SiteDemo) -> tuple[int, list[dict[str, Any]]]:
        _, link = demo.new_code("127.0.0.1")
        answer = await take_link(engine, link, "decide-on-my-own")
        await demo.connections[0].say_bye_and_close()
        log = ActivityLog(WalletDatabase(engine.home / "data" / "wallet.sqlite3"))
        ended = lambda: any(e["kind"] == "link" for e in log.read(origin=answer["origin"]))  # noqa: E731
        await until(ended, "the session's end in the activity log")
        await asyncio.sleep(1.5)  # longer than the test schedule's first waits
        return len(demo.hellos), log.read(origin=answer["origin"])

    hellos, entries = with_site(body)
    assert hellos == 1  # a bye is not a drop: the wallet does not come back
    assert [e["outcome"] for e in entries if e["kind"] == "link"] == ["bye"]


def test_with_decide_on_my_own_turned_off_a_new_link_asks_while_the_first_is_open(
    engine: Engine,
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}

    def consents_opened() -> int:
        return engine.log.read_text(errors="replace").count("event=consent-open")

    async def change(session: aiohttp.ClientSession, **body: Any) -> Any:
        async with session.post(
            f"{engine.url}/v1/sites/change", json=body, headers=headers
        ) as done:
            return await done.json()

    async def body(demo: SiteDemo) -> tuple[int, int]:
        _, link = demo.new_code("127.0.0.1")
        first = await take_link(engine, link, "decide-on-my-own")
        assert first["ok"], first
        async with aiohttp.ClientSession() as session:
            off = await change(
                session, action="decide-on-my-own", origin=first["origin"], setting=False
            )
            assert off["changed"] is True
            before = consents_opened()
            _, again = demo.new_code("127.0.0.1")
            asking = asyncio.create_task(take_link(engine, again, "ask"))
            await until(lambda: consents_opened() > before or asking.done(), "a consent or a link")
            asked = consents_opened() - before
            asking.cancel()  # the visitor never answers: the consent closes with its asker
            with contextlib.suppress(asyncio.CancelledError):
                await asking
            hellos = len(demo.hellos)
            await change(session, action="forget", origin=first["origin"])
        return asked, hellos

    asked, hellos = with_site(body)
    assert (asked, hellos) == (1, 1)
