"""The local API's low rows, each refused cleanly with its code: a wallet cookie that is not
UTF-8, a ``Host`` that only starts like a loopback name, and a native-host message whose id
could never be echoed back. Real ``serve``, real sockets, the real native host."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from engine import TOKEN, Engine, free_port, start_engine
from test_native_host import PAGE, answers, framed, run_host

from byoa_skills.extension.framing import MAX_TO_BROWSER


@pytest.fixture(scope="module")
def light_engine(engine_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """``serve`` on ``tiny.en`` with one worker: these tests need its doors, not its speed."""
    home = tmp_path_factory.mktemp("round2-home")
    (home / "cache").mkdir()
    (home / "cache" / "models").symlink_to(engine_home / "cache" / "models")
    running = start_engine(home, "--model", "tiny.en", "--workers", "1")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def raw(engine: Engine, head: bytes) -> tuple[int, dict[str, object]]:
    """Send ``head`` as is; the answer's status and its JSON body."""
    host, port = engine.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    body = rest.partition(b"\r\n\r\n")[2]
    try:
        return int(status_line.split()[1]), json.loads(body) if body else {}
    except ValueError:
        return int(status_line.split()[1]), {"not-json": body[:200].decode("latin-1")}


def signed_in(engine: Engine) -> None:
    """A live page session on ``engine``: the cookie check compares with each one."""
    status, body = engine_post(
        engine, "/v1/wallet/tickets", {}, {"Authorization": f"Bearer {TOKEN}"}
    )
    assert status == 200, body
    ticket = str(body["url"]).split("#ticket=", 1)[1]
    status, body = engine_post(
        engine, "/wallet/api/session", {"ticket": ticket}, {"Origin": engine.url}
    )
    assert status == 200, body


def engine_post(
    engine: Engine, path: str, body: dict[str, str], headers: dict[str, str]
) -> tuple[int, dict[str, object]]:
    headers = {**headers, "Content-Type": "application/json"}
    request = urllib.request.Request(engine.url + path, json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_wallet_cookie_that_is_not_utf8_is_401_no_session(light_engine: Engine) -> None:
    signed_in(light_engine)  # with no session at all, no cookie is ever compared
    head = (
        b"GET /wallet/api/sites HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Cookie: byoa_wallet=\xff\xfe\xc3abc\r\nConnection: close\r\n\r\n"
    )
    status, body = raw(light_engine, head)
    assert (status, body.get("code")) == (401, "no-session"), body


@pytest.mark.parametrize(
    "host",
    [
        "[::1]evil",
        "127.0.0.1:P@evil.com",
        "localhost:abc",
        "",
        "::1",
        "localhost.",
        "127.0.0.1:80:80",
        "localhost:8787 evil",
    ],
    ids=[
        "after-brackets",
        "userinfo",
        "port-not-a-number",
        "empty",
        "bare-ipv6",
        "trailing-dot",
        "two-ports",
        "space",
    ],
)
def test_a_host_that_only_starts_like_loopback_is_forbidden(
    light_engine: Engine, host: str
) -> None:
    head = (
        f"GET /metrics HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer test-token-0123456789"
        "\r\nConnection: close\r\n\r\n"
    ).encode()
    status, body = raw(light_engine, head)
    assert (status, body.get("code")) == (403, "forbidden-host"), body


def test_a_request_without_a_host_or_with_two_is_forbidden(light_engine: Engine) -> None:
    auth = b"Authorization: Bearer test-token-0123456789\r\nConnection: close\r\n\r\n"
    none = raw(light_engine, b"GET /metrics HTTP/1.0\r\n" + auth)
    two = raw(
        light_engine, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.com\r\n" + auth
    )
    assert none[0] == 403 and none[1].get("code") == "forbidden-host", none
    assert two[0] in (400, 403), two  # aiohttp may refuse a second Host itself


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost:{port}", "LOCALHOST", "[::1]:{port}"])
def test_every_loopback_host_with_a_numeric_port_is_still_served(
    light_engine: Engine, host: str
) -> None:
    port = light_engine.url.rsplit(":", 1)[1]
    head = (
        f"GET /metrics HTTP/1.1\r\nHost: {host.format(port=port)}\r\n"
        "Authorization: Bearer test-token-0123456789\r\nConnection: close\r\n\r\n"
    ).encode()
    host_, port_ = light_engine.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host_, int(port_)), timeout=30) as sock:
        sock.sendall(head)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


def test_a_native_message_with_a_3_mb_id_gets_an_error_answer(tmp_path: Path) -> None:
    huge = "x" * (3 * 1024 * 1024)
    assert len(huge) > MAX_TO_BROWSER  # it could never be echoed back
    messages = [
        {"id": huge, "type": "release", "origin": PAGE, "grantId": "g"},
        {"id": 2, "type": "release", "origin": PAGE, "grantId": "g"},
    ]
    done = run_host(
        tmp_path, b"".join(map(framed, messages)), f"--port={free_port()}", "--no-start"
    )
    assert done.returncode == 0, done.stderr
    got = sorted(answers(done.stdout), key=lambda answer: str(answer["id"]))
    assert got == [
        {"ok": False, "id": 2},
        {
            "ok": False,
            "id": None,
            "code": "bad-request",
            "message": "a message needs an id: an integer or a string of 1 to 128 characters",
        },
    ]
    assert b"event=host-message-bad-id" in done.stderr
    assert b"Traceback" not in done.stderr
