"""The frames every side of the WebSocket protocol speaks: the exact text each side sends,
through the writers and over real sockets, and the one reader's refusals."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import WSMsgType, web
from grants import GEO_MANIFEST
from hypothesis import assume, given
from hypothesis import strategies as st

from byoa_skills import __version__
from byoa_skills.consent import decision as decision_module
from byoa_skills.demos.site.app import start_site
from byoa_skills.directlink import client
from byoa_skills.directlink.intake import LinkIntake
from byoa_skills.protocol import frames
from byoa_skills.protocol.frames import (
    MAX_FRAME_BYTES,
    FrameError,
    call_id_valid,
    encode,
    read_frame,
)
from byoa_skills.serve.app import build_app
from byoa_skills.serve.metrics import EngineMetrics
from byoa_skills.skills import LOCAL_RECEIPT, CallResult, SkillEngine
from byoa_skills.store.activity import ActivityLog
from byoa_skills.store.link_pairings import PairingStore, RecentCodes
from byoa_skills.store.sites import SiteStore
from byoa_skills.wallet_shim.shim import WalletShim

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "frames-test-token"
CLIP = {"audio": {"mime": "audio/wav", "base64": "UklGR"}}
PERU = CallResult(ok=True, output={"text": "Peru"}, receipt=LOCAL_RECEIPT)
TOO_LONG = CallResult.refused("too-long", "the clip lasts 16.000 s, longer than the limit of 15 s")

# The writers: the text of every frame type, byte for byte. All but two are the bytes each
# side sent before the frames had one home; the wallet's bye (then '{"type":"bye"}') and the
# site's bad-session error (then '{"type":"error","code":"bad-session"}') took the one form,
# as docs/api.md says ("What changed on the wire").

GOLDEN: list[tuple[str, frames.Frame, str]] = [
    (
        "hello",
        frames.hello_frame(
            "s3cr3t",
            None,
            {"name": "byoa-skills", "version": "0.1.0"},
            frames.grant_object(
                ["audio.transcribe"],
                "2026-10-12T23:04:10Z",
                {"maxClipSeconds": 15, "maxParallelCalls": 8},
            ),
        ),
        '{"type": "hello", "v": "0.1", "session": "s3cr3t", "pairing": null, "wallet": '
        '{"name": "byoa-skills", "version": "0.1.0"}, "grant": {"skills": ["audio.transcribe"], '
        '"expiresAt": "2026-10-12T23:04:10Z", "limits": {"maxClipSeconds": 15, '
        '"maxParallelCalls": 8}}}',
    ),
    (
        "hello coming back",
        frames.hello_frame(
            None,
            "p41r",
            {"name": "byoa-skills", "version": "0.1.0"},
            frames.grant_object([], "2026-10-12T23:04:10Z", {}),
        ),
        '{"type": "hello", "v": "0.1", "session": null, "pairing": "p41r", "wallet": '
        '{"name": "byoa-skills", "version": "0.1.0"}, "grant": {"skills": [], '
        '"expiresAt": "2026-10-12T23:04:10Z", "limits": {}}}',
    ),
    (
        "welcome",
        frames.welcome_frame("p41r", "eyJieW9hIjoiMC4xLWRyYWZ0In0"),
        '{"type": "welcome", "pairing": "p41r", "manifest": "eyJieW9hIjoiMC4xLWRyYWZ0In0"}',
    ),
    (
        "error, site",
        frames.error_frame("bad-session"),
        '{"type": "error", "code": "bad-session"}',
    ),
    (
        "error, local API",
        frames.error_frame("not-json", "the frame is not JSON"),
        '{"type": "error", "code": "not-json", "message": "the frame is not JSON"}',
    ),
    (
        "call",
        frames.call_frame(1, "audio.transcribe", CLIP, {"language": "ru"}),
        '{"type": "call", "id": 1, "skill": "audio.transcribe", "input": {"audio": '
        '{"mime": "audio/wav", "base64": "UklGR"}}, "params": {"language": "ru"}}',
    ),
    (
        "result",
        frames.result_frame(1, PERU.to_json(with_code=False)),
        '{"type": "result", "id": 1, "ok": true, "output": {"text": "Peru"}, "receipt": '
        '{"cost": "0.000 USD", "provider": "local"}}',
    ),
    (
        "result refused, to a site",
        frames.result_frame(2, TOO_LONG.to_json(with_code=False)),
        '{"type": "result", "id": 2, "ok": false}',
    ),
    (
        "result refused, to the local caller",
        frames.result_frame("c-2", TOO_LONG.to_json()),
        '{"type": "result", "id": "c-2", "ok": false, "code": "too-long", "message": '
        '"the clip lasts 16.000 s, longer than the limit of 15 s"}',
    ),
    (
        "chunk",
        frames.chunk_frame(1, 0, "a "),
        '{"type": "chunk", "id": 1, "text": "a "}',
    ),
    (
        "chunk of another choice",
        frames.chunk_frame("x", 2, "b"),
        '{"type": "chunk", "id": "x", "text": "b", "choice": 2}',
    ),
    (
        "grant",
        frames.grant_frame(
            frames.grant_object(
                ["audio.transcribe"], "2026-10-12T23:04:10Z", {"maxParallelCalls": 2}
            )
        ),
        '{"type": "grant", "grant": {"skills": ["audio.transcribe"], "expiresAt": '
        '"2026-10-12T23:04:10Z", "limits": {"maxParallelCalls": 2}}}',
    ),
    ("ping", frames.ping_frame(), '{"type": "ping"}'),
    ("bye", frames.bye_frame(), '{"type": "bye"}'),
]


@pytest.mark.parametrize(
    ("frame", "text"), [(f, t) for _, f, t in GOLDEN], ids=[name for name, _, _ in GOLDEN]
)
def test_each_writer_writes_its_golden_text(frame: frames.Frame, text: str) -> None:
    assert encode(frame) == text
    assert read_frame(text) == frame
    assert type(read_frame(text)).type == json.loads(text)["type"]


def test_every_frame_type_has_a_golden_text() -> None:
    assert {json.loads(text)["type"] for _, _, text in GOLDEN} == set(frames.FRAME_TYPES)


def test_non_ascii_is_escaped_so_the_text_is_ascii() -> None:
    text = encode(frames.chunk_frame(1, 0, "Перу 🇵🇪"))
    assert (
        text == '{"type": "chunk", "id": 1, "text": "\\u041f\\u0435\\u0440\\u0443 '
        '\\ud83c\\uddf5\\ud83c\\uddea"}'
    )
    assert text.isascii() and read_frame(text) == frames.chunk_frame(1, 0, "Перу 🇵🇪")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_the_writer_never_writes_what_the_reader_refuses(value: float) -> None:
    with pytest.raises(ValueError):
        encode(frames.result_frame(1, {"ok": True, "output": {"score": value}}))


# The reader


def refusal(text: str) -> str:
    with pytest.raises(FrameError) as refused:
        read_frame(text)
    assert refused.value.message
    return refused.value.code


@pytest.mark.parametrize(
    "text",
    [
        "NaN",
        "Infinity",
        "-Infinity",
        '{"type": "ping", "x": NaN}',
        '{"type": "result", "id": 1, "output": [1, Infinity]}',
        '{"a": -Infinity}',
        "",
        "{not json",
        '{"type": "ping"} {"type": "ping"}',
        "{'type': 'ping'}",
        '{"type": "ping",}',
        '{"text": "a\tb"}',
        "[" * 100_000 + "]" * 100_000,
    ],
)
def test_text_that_is_not_json_is_refused_not_json(text: str) -> None:
    assert refusal(text) == frames.NOT_JSON


@pytest.mark.parametrize("text", ["[1, 2]", "[]", "null", "true", "1", '"call"', "0.5"])
def test_json_that_is_not_an_object_is_a_bad_request(text: str) -> None:
    assert refusal(text) == frames.BAD_REQUEST


@pytest.mark.parametrize(
    "call_id",
    [None, True, False, "", "x" * 129, 1.0, 1.5, [1], {"id": 1}],
)
def test_a_call_without_a_usable_id_is_a_bad_request(call_id: Any) -> None:
    frame = {"type": "call", "skill": "audio.transcribe"}
    if call_id is not None:
        frame["id"] = call_id
    assert not call_id_valid(call_id)
    assert refusal(encode(frame)) == frames.BAD_REQUEST


@pytest.mark.parametrize("call_id", [0, -1, 2**70, "a", "x" * 128, "ℵ" * 128])
def test_usable_call_ids(call_id: Any) -> None:
    assert call_id_valid(call_id)
    call = read_frame(encode(frames.call_frame(call_id, "s", {}, {})))
    assert isinstance(call, frames.Call) and call.id == call_id


def test_only_a_call_needs_an_id() -> None:
    assert read_frame('{"type": "result", "ok": false}') == frames.Result(id=None, ok=False)


def test_an_unknown_type_reads_as_ignored() -> None:
    text = '{"type": "something-new", "id": 7, "extra": {"deep": [1, null]}}'
    assert read_frame(text) == frames.Ignored("something-new")
    assert read_frame("{}") == frames.Ignored(None)
    assert read_frame('{"type": ["call"], "id": true}') == frames.Ignored(["call"])


def test_a_known_type_keeps_what_the_peer_sent_and_drops_unknown_members() -> None:
    hello = read_frame('{"type": "hello", "session": 42, "grant": "all", "extra": 1}')
    assert hello == frames.Hello(session=42, grant="all")
    assert (hello.v, hello.pairing, hello.wallet) == (None, None, None)
    assert read_frame('{"type": "ping", "x": 1}') == frames.Ping()
    assert read_frame('{"type": "error", "code": "bad-session"}').message is frames.ABSENT


def test_a_call_tells_a_road_left_out_from_one_given_as_null() -> None:
    left_out = read_frame('{"type": "call", "id": 1, "skill": "s"}')
    given = read_frame(
        '{"type": "call", "id": 1, "grantId": null, "registration": "p", "deadlineSeconds": 5}'
    )
    assert isinstance(left_out, frames.Call) and isinstance(given, frames.Call)
    assert (left_out.grant_id, left_out.registration) == (frames.ABSENT, frames.ABSENT)
    assert (left_out.input, left_out.params) == (None, None)
    assert (given.grant_id, given.registration, given.deadline_seconds) == (None, "p", 5)
    assert encode(given) == (
        '{"type": "call", "id": 1, "skill": null, "input": null, "params": null, '
        '"deadlineSeconds": 5, "grantId": null, "registration": "p"}'
    )


def test_a_result_writer_takes_only_the_members_a_result_has() -> None:
    with pytest.raises(TypeError):
        frames.result_frame(1, {"ok": True, "score": 1})


def test_the_close_codes_and_reasons_are_the_protocols() -> None:
    assert frames.LINK_CLOSE == {
        "not-json": (1007, b"malformed"),
        "message-too-large": (1009, b"message too large"),
    }
    assert frames.CLOSE_NOT_READING == (1008, b"not reading")
    assert frames.CLOSE_NO_HELLO == (1008, b"no hello")
    assert frames.CLOSE_BAD_SESSION == (1008, b"bad-session")
    assert frames.CLOSE_BYE == (1000, b"")


def padded(size: int, fill: str) -> str:
    """A ping frame of exactly ``size`` UTF-8 bytes, padded with ``fill``."""
    head, tail = '{"type": "ping", "pad": "', '"}'
    room = size - len(head) - len(tail)
    count, rest = divmod(room, len(fill.encode()))
    text = head + fill * count + "x" * rest + tail
    assert len(text.encode()) == size
    return text


@pytest.mark.parametrize(
    "fill", ["x", "é", "€", "🐱"], ids=["1-byte", "2-byte", "3-byte", "4-byte"]
)
def test_the_limit_is_4_mb_of_utf8_not_of_characters(fill: str) -> None:
    assert read_frame(padded(MAX_FRAME_BYTES, fill)) == frames.Ping()
    assert refusal(padded(MAX_FRAME_BYTES + 1, fill)) == frames.MESSAGE_TOO_LARGE


def test_a_lone_surrogate_counts_its_three_bytes() -> None:
    text = padded(MAX_FRAME_BYTES - 3 * 1000, "x")[:-2] + "\ud800" * 1001 + '"}'
    assert frames.utf8_length_over(text, MAX_FRAME_BYTES)
    assert not frames.utf8_length_over(text, MAX_FRAME_BYTES + 3)


def test_size_is_checked_before_the_text_is_parsed() -> None:
    assert refusal("x" * (MAX_FRAME_BYTES + 1)) == frames.MESSAGE_TOO_LARGE


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
OBJECTS = st.dictionaries(
    st.sampled_from([*frames.FRAME_TYPES, "x"]).map(str) | st.text(), JSON_VALUES, max_size=6
)


@given(OBJECTS, st.sampled_from([None, *frames.FRAME_TYPES]))
def test_any_json_object_reads_as_its_type_with_what_it_carried(
    frame: dict[str, Any], kind: str | None
) -> None:
    if kind is not None:
        frame["type"] = kind
    assume(frame.get("type") != "call" or call_id_valid(frame.get("id")))
    text = encode(frame)
    assert text.isascii()
    typed = read_frame(text)
    if frame.get("type") not in frames.FRAME_TYPES:
        assert typed == frames.Ignored(frame.get("type"))
        return
    assert type(typed).type == frame["type"]
    written = typed.to_json()
    carried = {key: value for key, value in frame.items() if key in written}
    assert carried == {key: written[key] for key in carried}
    assert all(value is None for key, value in written.items() if key not in frame)
    assert read_frame(encode(typed)) == typed


@given(st.one_of(st.integers(), st.text(max_size=200), st.booleans(), st.floats(), st.none()))
def test_call_ids_are_integers_and_short_strings(value: Any) -> None:
    expected = (type(value) is int) or (isinstance(value, str) and 1 <= len(value) <= 128)
    assert call_id_valid(value) == expected


# Each side's own text, over real sockets


def test_the_site_sends_its_golden_frames() -> None:
    async def main() -> list[str]:
        runner, url, demo = await start_site()
        sent: list[str] = []
        try:
            async with aiohttp.ClientSession() as http:
                session, _ = demo.new_code("127.0.0.1") or ("", "")
                ws = await http.ws_connect(url + "/byoa/ws")
                await ws.send_str(
                    encode(
                        frames.hello_frame(
                            session,
                            None,
                            {"name": "t", "version": "1"},
                            frames.grant_object(["audio.transcribe"], "2099-01-01T00:00:00Z", {}),
                        )
                    )
                )
                sent.append(await text_of(ws))
                pairing = json.loads(sent[0])["pairing"]
                call = asyncio.create_task(
                    demo.call(session, "audio.transcribe", CLIP, {"language": "ru"})
                )
                sent.append(await text_of(ws))
                await ws.send_str('{"type": "result", "id": 1, "ok": true, "output": {}}')
                assert await call is not None
                stranger = await http.ws_connect(url + "/byoa/ws")
                await stranger.send_str(
                    encode(
                        frames.hello_frame("not-a-code", None, {}, frames.grant_object([], "", {}))
                    )
                )
                sent.append(await text_of(stranger))
                await demo.close()
                sent.append(await text_of(ws))
                return [*sent, pairing, demo.manifest64]
        finally:
            await runner.cleanup()

    welcome, call, error, bye, pairing, manifest64 = asyncio.run(main())
    assert welcome == f'{{"type": "welcome", "pairing": "{pairing}", "manifest": "{manifest64}"}}'
    assert call == (
        '{"type": "call", "id": 1, "skill": "audio.transcribe", "input": {"audio": '
        '{"mime": "audio/wav", "base64": "UklGR"}}, "params": {"language": "ru"}}'
    )
    assert error == '{"type": "error", "code": "bad-session"}'
    assert bye == '{"type": "bye"}'


def test_the_site_closes_on_not_json_and_ignores_a_non_object() -> None:
    async def main() -> tuple[int | None, bool]:
        runner, url, demo = await start_site()
        try:
            async with aiohttp.ClientSession() as http:
                session, _ = demo.new_code("127.0.0.1") or ("", "")
                ws = await http.ws_connect(url + "/byoa/ws")
                await ws.send_str("[1, 2]")  # ignored before the hello
                await ws.send_str(
                    encode(frames.hello_frame(session, None, {}, frames.grant_object([], "", {})))
                )
                assert json.loads(await text_of(ws))["type"] == "welcome"
                await ws.send_str('"a string"')  # ignored after it
                await ws.send_str('{"type": "result", "id": Infinity}')
                await ws.receive(timeout=10)
                return ws.close_code, demo.connection(session) is None
        finally:
            await runner.cleanup()

    assert asyncio.run(main()) == (1007, True)


async def text_of(ws: aiohttp.ClientWebSocketResponse) -> str:
    message = await ws.receive(timeout=10)
    assert message.type == WSMsgType.TEXT, message
    return str(message.data)


class RecordingSite:
    """A site endpoint that keeps every text the wallet sends, welcomes it with
    ``manifest_echo``, and lets a test speak on the socket."""

    def __init__(self, manifest_echo: str) -> None:
        self.manifest_echo = manifest_echo
        self.texts: asyncio.Queue[str] = asyncio.Queue()
        self.socket: asyncio.Future[web.WebSocketResponse] = asyncio.Future()
        self.closed = asyncio.Event()

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        hello = await ws.receive()
        self.texts.put_nowait(hello.data)
        await ws.send_str(encode(frames.welcome_frame("p41r", self.manifest_echo)))
        self.socket.set_result(ws)
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                self.texts.put_nowait(message.data)
        self.closed.set()
        return ws

    async def next_text(self, kind: str) -> str:
        """The next text the wallet sent whose type is ``kind``."""
        while True:
            text = await asyncio.wait_for(self.texts.get(), 10)
            if json.loads(text)["type"] == kind:
                return text


@pytest.fixture
def shim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> WalletShim:
    """An in-process wallet's shim with no model (every call is refused), its records kept
    under ``tmp_path``. A link's speech skill counts as one it can serve (these tests are of
    the frames, not of a model: every call is refused ``skill-unavailable``); with no text
    source, text is left out."""
    monkeypatch.setenv("BYOA_SKILLS_HOME", str(tmp_path))

    async def every_skill(engine: SkillEngine, manifest: dict[str, Any]) -> set[str]:
        return set(manifest["skills"]) - {"text.generate"}

    monkeypatch.setattr(decision_module, "fitting_skills", every_skill)
    return WalletShim(SkillEngine(None), SiteStore(), ActivityLog())


@asynccontextmanager
async def wallet_at(
    shim: WalletShim, site: RecordingSite, manifest_text: str
) -> AsyncIterator[dict[str, Any]]:
    """The wallet that took a link to ``site``: the answer to taking it; before it leaves, the
    session's end in the activity log."""
    app = web.Application()
    app.router.add_get("/byoa/ws", site.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    intake = LinkIntake(shim, pairings=PairingStore(), recent=RecentCodes(), dev_local=True)
    link = (
        f"bringyourownagent://connect?v=0.1&endpoint=ws%3A%2F%2Flocalhost%3A{port}"
        f"%2Fbyoa%2Fws&manifest={manifest_text}&session={secrets.token_urlsafe(24)}"
    )
    try:
        yield await intake.take(link, "allow")
        for _ in range(1000):  # the session ends once the site closes
            if any(entry["kind"] == "link" for entry in shim.activity.read()):
                break
            await asyncio.sleep(0.01)
    finally:
        await intake.close()
        await runner.cleanup()


MANIFEST_TEXT = base64.urlsafe_b64encode(json.dumps(GEO_MANIFEST).encode()).decode().rstrip("=")


def test_the_wallet_sends_its_golden_frames(
    shim: WalletShim, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "PING_SECONDS", 0.05)

    async def main() -> tuple[str, str, str, int | None]:
        site = RecordingSite(MANIFEST_TEXT)
        async with wallet_at(shim, site, MANIFEST_TEXT) as taken:
            assert taken["ok"], taken
            hello = await site.next_text("hello")
            ws = await site.socket
            for text in (
                "[1, 2]",
                '"text"',
                '{"type": "something-new"}',
                '{"type": "call", "skill": "audio.transcribe", "input": {}}',
                '{"type": "call", "id": true, "skill": "audio.transcribe"}',
                '{"type": "call", "id": "c-1", "skill": "audio.transcribe",'
                ' "input": {}, "params": {}}',
            ):
                await ws.send_str(text)
            result = await site.next_text("result")
            ping = await site.next_text("ping")
            await ws.send_str("NaN")
            await asyncio.wait_for(site.closed.wait(), 10)
            return hello, result, ping, ws.close_code

    hello, result, ping, close_code = asyncio.run(main())
    grant = json.loads(hello)["grant"]
    session = json.loads(hello)["session"]
    assert re.fullmatch(r"[\w-]{32}", session) and re.fullmatch(r"\d{4}-.+Z", grant["expiresAt"])
    assert hello == (
        f'{{"type": "hello", "v": "0.1", "session": "{session}", "pairing": null, "wallet": '
        f'{{"name": "byoa-skills", "version": "{__version__}"}}, "grant": {{"skills": '
        f'["audio.transcribe"], "expiresAt": "{grant["expiresAt"]}", '
        '"limits": {"maxCallsPerMinute": 40, "maxClipSeconds": 15, "maxParallelCalls": 8, '
        '"maxCallSeconds": 120.0}}}'
    )
    assert result == '{"type": "result", "id": "c-1", "ok": false}'
    assert ping == '{"type": "ping"}'
    assert close_code == 1007
    calls = [e for e in shim.activity.read() if e["kind"] == "call"]
    assert len(calls) == 1  # the calls without a usable id were not run
    links = [e for e in shim.activity.read() if e["kind"] == "link"]
    assert [e["outcome"] for e in links] == ["malformed"]


def test_the_wallet_says_bye_to_a_manifest_it_did_not_allow(shim: WalletShim) -> None:
    async def main() -> tuple[dict[str, Any], str]:
        site = RecordingSite(MANIFEST_TEXT + "A")
        async with wallet_at(shim, site, MANIFEST_TEXT) as taken:
            return taken, await site.next_text("bye")

    taken, bye = asyncio.run(main())
    assert (taken["ok"], taken["code"]) == (False, "manifest-mismatch")
    assert bye == '{"type": "bye"}'


# The local API's answers


async def local_api_texts(shim: WalletShim, texts: list[str], expect: int) -> list[str]:
    runner = web.AppRunner(build_app(shim.engine, EngineMetrics(), TOKEN, shim))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(
                f"http://127.0.0.1:{port}/v1/ws", headers={"Authorization": f"Bearer {TOKEN}"}
            )
            for text in texts:
                await ws.send_str(text)
            return [await text_of(ws) for _ in range(expect)]
    finally:
        await runner.cleanup()


def test_the_local_api_answers_each_refusal_with_its_error_frame(shim: WalletShim) -> None:
    texts = [
        "NaN",
        '{"type": "ping", "x": -Infinity}',
        "[1]",
        '{"type": "call", "id": true}',
        padded(MAX_FRAME_BYTES + 1, "x"),
        padded(MAX_FRAME_BYTES + 1, "é"),
        '{"type": "ping"}',
        '{"type": "bye"}',
        '{"type": "call", "id": 7, "skill": "no.such-skill"}',
    ]
    answers = asyncio.run(local_api_texts(shim, texts, expect=7))
    not_json = '{"type": "error", "code": "not-json", "message": "the frame is not JSON"}'
    too_large = (
        f'{{"type": "error", "code": "message-too-large", "message": '
        f'"a frame over {MAX_FRAME_BYTES} bytes"}}'
    )
    assert answers[:6] == [
        not_json,
        not_json,
        '{"type": "error", "code": "bad-request", "message": "a frame must be a JSON object"}',
        '{"type": "error", "code": "bad-request", "message": "a call frame needs an id: an '
        'integer or a string of 1 to 128 characters"}',
        too_large,
        too_large,
    ]
    result = json.loads(answers[6])
    assert answers[6].startswith('{"type": "result", "id": 7, "ok": false, "code": ')
    assert (result["code"], result["message"]) == ("unknown-skill", result["message"])


def test_the_local_api_takes_a_grant_id_given_as_null_to_the_shim(shim: WalletShim) -> None:
    texts = [
        '{"type": "call", "id": 1, "skill": "audio.transcribe", "grantId": null}',
        '{"type": "call", "id": 2, "skill": "audio.transcribe", "registration": null}',
        '{"type": "call", "id": 3, "skill": "audio.transcribe"}',
    ]
    answers = [json.loads(text) for text in asyncio.run(local_api_texts(shim, texts, expect=3))]
    codes = {answer["id"]: answer["code"] for answer in answers}
    assert codes == {1: "unknown-grant", 2: "not-registered", 3: "bad-input"}


# The docs name every refusal


@pytest.mark.parametrize("page", ["api.md", "direct-link.md"])
def test_every_frame_refusal_is_documented(page: str) -> None:
    text = (ROOT / "docs" / page).read_text()
    assert all(f"`{code}`" in text for code in frames.CODES)
