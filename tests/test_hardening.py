"""What a hostile site, a hostile local client, a planted file or a shared folder can do to the
engine, each refused: real sockets, real files, the real engine where it takes part."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import json
import os
import socket
import struct
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from engine import TOKEN, Engine
from grants import GEO_MANIFEST, grant
from test_link_intake import intake_in, make_link

from byoa_skills.byoag.errors import ByoagError
from byoa_skills.byoag.hostname import PlatformHost
from byoa_skills.byoag.registrations import RegistrationStore
from byoa_skills.byoag.transport import platform_client
from byoa_skills.directlink.addresses import is_public
from byoa_skills.protocol.frames import encode
from byoa_skills.protocol.pending import PendingCalls, close_within
from byoa_skills.serve.token import UnsafePathError, load_or_create_token
from byoa_skills.store.clock import rfc3339
from byoa_skills.store.database import StoreError, WalletDatabase
from byoa_skills.wallet_shim.gate import Measured, _decide, recent_calls
from byoa_skills.wallet_shim.grants import GrantRefusal, build_grant
from byoa_skills.wallet_shim.limits import MAX_CALLS_PER_MINUTE

NOW = 1_790_000_000_000
IS_ROOT = hasattr(os, "getuid") and os.getuid() == 0


def raw_request(engine: Engine, head: bytes, timeout: float = 30) -> bytes:
    """Send ``head`` as is and read the answer until the engine closes."""
    host, port = engine.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


# The local API


def test_an_authorization_header_that_is_not_utf8_is_401(engine: Engine) -> None:
    head = (
        b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \xff\xfe\xc3\r\n"
        b"Connection: close\r\n\r\n"
    )
    answer = raw_request(engine, head)
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]
    assert b'"unauthorized"' in answer


def test_a_client_that_never_ends_its_request_head_is_cut_off(engine: Engine) -> None:
    # the head is never finished; the engine closes the socket instead of holding it for an hour
    answer = raw_request(engine, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", 90)
    assert b"200" not in answer


def test_the_description_is_served_without_a_token(engine: Engine) -> None:
    status, body = engine.get("/openapi.json", token=None)
    assert status == 200 and '"openapi": "3.1.0"' in body


def test_a_link_with_an_unreadable_store_is_refused_cleanly(tmp_path: Path) -> None:
    (tmp_path / "wallet.sqlite3").write_bytes(b"this is not a database, " * 100)
    intake = intake_in(tmp_path)

    async def take() -> dict[str, Any]:
        return await intake.take(make_link(9), "allow")

    answer = asyncio.run(take())
    assert answer["ok"] is False and answer["code"] == "site-unreadable", answer


# Pending calls: a peer that does not read


@contextlib.asynccontextmanager
async def silent_websocket_peer(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> AsyncIterator[socket.socket]:
    """A loopback server answering ``/ws`` with ``handler``, and a raw client socket with a
    4 kB receive buffer that opens the WebSocket and then reads nothing."""
    app = web.Application()
    app.router.add_get("/ws", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    sock = socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        yield sock
    finally:
        sock.close()
        await runner.cleanup()


def test_a_peer_that_never_reads_is_closed_and_its_calls_cancelled() -> None:
    async def main() -> tuple[bool, bool, int]:
        outcome: dict[str, Any] = {}
        done = asyncio.Event()

        async def handler(request: web.Request) -> web.WebSocketResponse:
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            pending = PendingCalls(ws.send_str, 4, send_seconds=1.0)
            forever = asyncio.Event()

            async def waiting_call() -> None:
                await forever.wait()

            for _ in range(4):
                pending.start(waiting_call())
            outcome["full"] = pending.full
            big = {"type": "chunk", "id": 1, "text": "x" * 65536}
            for _ in range(2000):  # 128 MB: more than any socket buffer holds
                if not await pending.send(big):
                    break
            outcome["stalled"] = pending.stalled.is_set()
            await pending.cancel()
            outcome["left"] = len(pending)
            await close_within(ws, 1008, b"not reading", 1.0)
            done.set()
            return ws

        async with silent_websocket_peer(handler):
            await asyncio.wait_for(done.wait(), 60)
        return outcome["full"], outcome["stalled"], outcome["left"]

    full, stalled, left = asyncio.run(main())
    assert full
    assert stalled
    assert left == 0


def test_a_peer_whose_writes_never_block_is_still_found_not_reading() -> None:
    # 40 frames of 1 kB: the socket's send queue takes them all, so no write ever waits;
    # the peer still takes none of them, and it is reset once closed
    async def main() -> tuple[bool, int]:
        outcome: dict[str, Any] = {}
        done = asyncio.Event()

        async def handler(request: web.Request) -> web.WebSocketResponse:
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            pending = PendingCalls(ws.send_str, 4, send_seconds=1.0)
            for _ in range(40):
                await pending.send({"type": "chunk", "id": 1, "text": "x" * 1000})
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(pending.stalled.wait(), 10)
            outcome["stalled"] = pending.stalled.is_set()
            await pending.cancel()
            await close_within(ws, 1008, b"not reading", 1.0)
            done.set()
            return ws

        error = 0
        async with silent_websocket_peer(handler) as sock:
            await asyncio.wait_for(done.wait(), 60)
            for _ in range(50):  # the reset reaches a socket that still reads nothing
                error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if error:
                    break
                await asyncio.sleep(0.1)
        return outcome["stalled"], error

    stalled, error = asyncio.run(main())
    assert stalled, "the peer took none of the frames and was not found stalled"
    assert error == errno.ECONNRESET, "the peer was not told at once that it is gone"


def test_the_local_websocket_refuses_calls_over_its_bound(engine: Engine) -> None:
    # 120 calls in one write: the engine reads them back to back, so more than its bound of
    # 64 are pending at once; each call is still answered exactly once
    count = 120
    frames = b"".join(
        masked_text(
            encode(
                {"type": "call", "id": i, "skill": "audio.transcribe", "input": {}, "params": {}}
            )
        )
        for i in range(count)
    )
    with raw_websocket(engine, "/v1/ws", {"Authorization": f"Bearer {TOKEN}"}) as sock:
        sock.sendall(frames)
        results = [frame for frame in read_texts(sock, count) if frame.get("type") == "result"]
    assert sorted(frame["id"] for frame in results) == list(range(count))
    codes = Counter(frame.get("code") for frame in results)
    assert codes["too-many-pending-calls"] > 0, codes
    assert set(codes) == {"bad-input", "too-many-pending-calls"}, codes


@contextlib.contextmanager
def raw_websocket(engine: Engine, path: str, headers: dict[str, str]) -> Iterator[socket.socket]:
    """A WebSocket to the engine on a plain socket, after the handshake."""
    host, port = engine.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        key = base64.b64encode(os.urandom(16)).decode()
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            f"Sec-WebSocket-Version: 13\r\n{extra}\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head
        yield sock


def masked_text(text: str) -> bytes:
    """One client text frame (masked, as a client must send it)."""
    payload = text.encode()
    mask = os.urandom(4)
    size = len(payload)
    if size < 126:
        header = struct.pack("!BB", 0x81, 0x80 | size)
    elif size < 65536:
        header = struct.pack("!BBH", 0x81, 0x80 | 126, size)
    else:
        header = struct.pack("!BBQ", 0x81, 0x80 | 127, size)
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def read_texts(sock: socket.socket, count: int) -> list[dict[str, Any]]:
    """The next ``count`` text frames the server sends, as JSON."""
    buffer = b""
    frames: list[dict[str, Any]] = []

    def take(n: int) -> bytes:
        nonlocal buffer
        while len(buffer) < n:
            chunk = sock.recv(65536)
            if not chunk:
                raise AssertionError(f"closed after {len(frames)} frames")
            buffer += chunk
        piece, buffer = buffer[:n], buffer[n:]
        return piece

    while len(frames) < count:
        first, second = take(2)
        size = second & 0x7F
        if size == 126:
            (size,) = struct.unpack("!H", take(2))
        elif size == 127:
            (size,) = struct.unpack("!Q", take(8))
        payload = take(size)
        if first & 0x0F == 0x1:
            frames.append(json.loads(payload))
    return frames


# The rate window and its ceiling


def with_rate(rate: int | None) -> dict[str, Any]:
    """The geography game's manifest with another ``maxCallsPerMinute`` (None: none)."""
    limits = {"maxClipSeconds": 15}
    if rate is not None:
        limits["maxCallsPerMinute"] = rate
    return {**GEO_MANIFEST, "purpose": {**GEO_MANIFEST["purpose"], "limits": limits}}


def test_a_rate_above_the_ceiling_is_refused() -> None:
    manifest = with_rate(2**53 - 1)
    with pytest.raises(GrantRefusal) as refused:
        build_grant("https://a.example", manifest, grant(), NOW)
    assert refused.value.code == "limit-invalid"
    assert refused.value.errors[0]["path"] == "/purpose/limits/maxCallsPerMinute"
    with pytest.raises(GrantRefusal) as refused:
        build_grant(
            "https://a.example",
            GEO_MANIFEST,
            grant(limits={"maxCallsPerMinute": MAX_CALLS_PER_MINUTE + 1}),
            NOW,
        )
    assert refused.value.errors[0]["path"] == "/limits/maxCallsPerMinute"
    build_grant(
        "https://a.example",
        GEO_MANIFEST,
        grant(limits={"maxCallsPerMinute": MAX_CALLS_PER_MINUTE}),
        NOW,
    )


def test_a_full_window_is_refused_as_the_reference_gate_would() -> None:
    from bringyourownagent import check_call

    limit = MAX_CALLS_PER_MINUTE
    document = grant(limits={"maxCallsPerMinute": limit}, expiresAt=rfc3339(NOW + 3_600_000))
    built = build_grant("https://a.example", with_rate(None), document, NOW)
    times = [NOW - 59_000 + i * 40 for i in range(limit)]  # all inside the last minute
    built.call_times.extend([NOW - 70_000, NOW - 60_000, *times])  # two already out of it
    call = Measured("audio.transcribe", {}, {"clipSeconds": 1}, "local-model", 0)  # type: ignore[arg-type]
    decided = _decide(built, call, NOW)
    assert recent_calls(built, NOW) == limit
    assert len(built.call_times) == limit, "times out of the window are dropped"
    expected = check_call(
        built.manifest,
        built.reference,
        {
            "skill": "audio.transcribe",
            "at": rfc3339(NOW),
            "provider": "local-model",
            "estimatedCost": "0 USD",
            "input": {"clipSeconds": 1, "textChars": 0},
        },
        {"spent": "0 USD", "callTimes": [rfc3339(t) for t in times]},
    )
    assert decided.decision == expected["decision"] == "blocked"
    assert [(r["code"], r["message"]) for r in decided.reasons] == [
        (r["code"], r["message"]) for r in expected["reasons"]
    ]
    built.call_times.popleft()
    assert _decide(built, call, NOW).admitted


# Pairings, files and folders


def test_revoking_dot_dot_deletes_nothing_outside_its_platform(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "byoag" / "platform.example").mkdir(parents=True)
    (data / "wallet.sqlite3").write_bytes(b"blocked sites live here")
    store = RegistrationStore(data / "byoag")
    for name in ("..", ".", "", "..."):
        assert store.remove(name) is False
    assert (data / "wallet.sqlite3").exists()
    assert (data / "byoag" / "platform.example").is_dir()
    assert store.remove("platform.example") is True
    assert not (data / "byoag" / "platform.example").exists()


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "config"
    folder.mkdir(mode=0o700)
    token = folder / "token"
    token.write_text("planted\n")
    token.chmod(0o644)
    with pytest.raises(UnsafePathError, match="other users"):
        load_or_create_token(token)
    token.chmod(0o600)
    assert load_or_create_token(token)[0] == "planted"


def test_a_token_folder_everyone_can_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "config"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(UnsafePathError, match="writable by every user"):
        load_or_create_token(folder / "token")
    assert not (folder / "token").exists(), "nothing is written there either"


def test_a_token_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "config"
    folder.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("planted\n")
    elsewhere.chmod(0o600)
    (folder / "token").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        load_or_create_token(folder / "token")


@pytest.mark.skipif(not IS_ROOT, reason="giving a file to another user needs root")
def test_files_of_another_user_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "config"
    folder.mkdir(mode=0o700)
    token = folder / "token"
    token.write_text("planted\n")
    token.chmod(0o600)
    os.chown(token, 65534, 65534)
    with pytest.raises(UnsafePathError, match="another user"):
        load_or_create_token(token)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "wallet.sqlite3").touch(mode=0o600)
    os.chown(data / "wallet.sqlite3", 65534, 65534)
    with pytest.raises(StoreError, match="another user"):
        WalletDatabase(data / "wallet.sqlite3").open()
    os.chown(data, 65534, 65534)
    with pytest.raises(StoreError, match="another user"):
        WalletDatabase(data / "wallet.sqlite3").open()


def test_a_database_that_is_a_link_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    target = tmp_path / "target.sqlite3"
    target.touch(mode=0o600)
    (data / "wallet.sqlite3").symlink_to(target)
    with pytest.raises(StoreError, match="symbolic link"):
        WalletDatabase(data / "wallet.sqlite3").open()
    (data / "wallet.sqlite3").unlink()
    (data / "wallet.sqlite3-wal").symlink_to(target)
    with pytest.raises(StoreError, match="symbolic link"):
        WalletDatabase(data / "wallet.sqlite3").open()


# Addresses and the BYOAg transport


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::a00:1",
        "64:ff9b:1::a00:1",
        "2002:7f00:1::1",
        "::7f00:1",
        "::ffff:0:7f00:1",
        "::ffff:127.0.0.1",
        "2002:c0a8:101::1",
        "64:ff9b::192.168.1.1",
        "::1",
        "::",
    ],
)
def test_private_and_loopback_addresses_in_ipv6_forms_are_not_public(address: str) -> None:
    assert not is_public(address)


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8"],
)
def test_public_addresses_stay_public(address: str) -> None:
    assert is_public(address)


def test_an_answer_in_two_pieces_is_read_whole() -> None:
    async def main() -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            await response.write(b'{"pieces": [1, ')
            await asyncio.sleep(0.3)
            await response.write(b"2]}")
            await response.write_eof()
            return response

        app = web.Application()
        app.router.add_get("/a", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        platform = PlatformHost(f"localhost:{port}", "localhost", port, secure=False)
        try:
            async with platform_client(platform, "platform-unreachable") as client:
                return await client.get(platform.url("/a"))
        except ByoagError as error:
            raise AssertionError(str(error)) from None
        finally:
            await runner.cleanup()

    answer = asyncio.run(main())
    assert answer.body == {"pieces": [1, 2]}


def test_a_nested_frame_on_the_local_websocket_is_refused_and_the_socket_stays(
    engine: Engine,
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with raw_websocket(engine, "/v1/ws", headers) as sock:
        sock.sendall(masked_text('{"type": "call", "id": 1, "input": ' + "[" * 100_000))
        sock.sendall(masked_text(encode({"type": "call", "id": 2, "skill": "no.such"})))
        refused, answered = read_texts(sock, 2)
    assert (refused["type"], refused["code"]) == ("error", "not-json")
    assert (answered["type"], answered["id"], answered["code"]) == ("result", 2, "unknown-skill")


def test_expired_grants_are_forgotten_when_a_grant_is_taken(tmp_path: Path) -> None:
    from byoa_skills.skills import SkillEngine
    from byoa_skills.store.activity import ActivityLog
    from byoa_skills.store.sites import SiteStore
    from byoa_skills.wallet_shim.shim import WalletShim

    now = [NOW]
    database = WalletDatabase(tmp_path / "wallet.sqlite3")
    shim = WalletShim(
        SkillEngine(None), SiteStore(database), ActivityLog(database), clock=lambda: now[0]
    )
    short = shim.create_grant(
        "https://a.example", GEO_MANIFEST, grant(expiresAt=rfc3339(NOW + 1000))
    )
    assert shim.grants.get(short["grantId"]) is not None
    now[0] += 2000
    shim.create_grant("https://a.example", GEO_MANIFEST, grant(expiresAt=rfc3339(NOW + 3_600_000)))
    assert shim.grants.get(short["grantId"]) is None
    database.close()
