"""The wallet's checks of a ``bringyourownagent://connect`` link, and ``byoa-skills link check``."""

from __future__ import annotations

import argparse
import base64
import json
import re
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from byoa_skills.commands import link as link_command
from byoa_skills.directlink.check import CODES, LinkCheck, check_link

ROOT = Path(__file__).resolve().parent.parent

MANIFEST: dict[str, Any] = {
    "byoa": "0.1-draft",
    "purpose": {
        "summary": "Family geography game: recognise country names spoken aloud",
        "limits": {"maxClipSeconds": 15, "maxCallsPerMinute": 40},
    },
    "skills": {"audio.transcribe": {"languages": ["en", "ru", "sk"], "required": True}},
    "privacy": "personal-voice",
    "expectedCost": {"perSession": "0.05 USD"},
}
SESSION = "Jf3k2N0q-Yb8wQe1sX5mTt7LrA9cDhKu"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def encode_uri_component(text: str) -> str:
    """JavaScript's ``encodeURIComponent``."""
    return quote(text, safe="-_.!~*'()")


def manifest64(manifest: Any = MANIFEST) -> str:
    """``Buffer.from(JSON.stringify(manifest)).toString('base64url')``."""
    return b64url(json.dumps(manifest, separators=(",", ":"), ensure_ascii=False).encode())


def make_link(
    endpoint: str = "wss://game.example.org/byoa/ws",
    manifest: str | None = None,
    session: str = SESSION,
    *,
    version: str = "0.1",
    encode: bool = True,
) -> str:
    """A link built as the guide's Node server builds it."""
    endpoint = encode_uri_component(endpoint) if encode else endpoint
    manifest = manifest64() if manifest is None else manifest
    return (
        f"bringyourownagent://connect?v={version}"
        f"&endpoint={endpoint}&manifest={manifest}&session={session}"
    )


GOOD = make_link()


def test_the_guides_link_passes_with_every_part() -> None:
    session = b64url(secrets.token_bytes(24))
    result = check_link(make_link(session=session), dev_local=False)
    assert result == LinkCheck(
        ok=True,
        endpoint="wss://game.example.org/byoa/ws",
        host="game.example.org",
        port=443,
        path="/byoa/ws",
        secure=True,
        manifest=MANIFEST,
        manifest_text=manifest64(),
        session=session,
    )


def test_a_link_built_by_node_passes() -> None:
    assert shutil.which("node"), "Node.js is needed (see README: set-up)"
    script = r"""
const { randomBytes } = require('node:crypto');
const HOST = 'game.example.org';
const MANIFEST = JSON.parse(process.argv[1]);
const MANIFEST64 = Buffer.from(JSON.stringify(MANIFEST)).toString('base64url');
const session = process.argv[2] || randomBytes(24).toString('base64url');
for (const path of ['/byoa/ws', '/byoa/ws?room=a%20b&x=1']) {
  console.log('bringyourownagent://connect?v=0.1'
    + '&endpoint=' + encodeURIComponent(`wss://${HOST}${path}`)
    + '&manifest=' + MANIFEST64 + '&session=' + session);
}
"""
    manifest = json.loads(json.dumps(MANIFEST))
    manifest["purpose"]["summary"] = "Географическая игра: страны вслух — «Перу»"

    def node(*args: str) -> list[str]:
        done = subprocess.run(
            ["node", "-e", script, json.dumps(manifest), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout.split()

    paths = ["/byoa/ws", "/byoa/ws?room=a%20b&x=1"]
    for link, path in zip(node(), paths, strict=True):
        result = check_link(link, dev_local=False)
        assert result.ok, result
        assert result.path == path
        assert result.endpoint == "wss://game.example.org" + path
        assert result.manifest == manifest
        assert result.manifest_text == manifest64(manifest)
        assert result.session is not None and len(result.session) == 32
    ours = [make_link("wss://game.example.org" + path, manifest64(manifest)) for path in paths]
    assert node(SESSION) == ours


def endpoint_link(endpoint: str) -> str:
    return make_link(endpoint=endpoint)


IP_ADDRESSES = [
    "127.0.0.1",
    "8.8.8.8",
    "2130706433",
    "0x7f000001",
    "0X7F000001",
    "0x7f.0.0.1",
    "0177.0.0.1",
    "127.1",
    "127.0.1",
    "0",
    "1.2.3.4.",
    "999.999.999.999",
    "foo.123",
    "example.0x1f",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[fe80::1%25eth0]",
    "[2001:db8::1]:443",
    "::1",
    "127%2E0%2E0%2E1",
]
LOCAL_NAMES = [
    "localhost",
    "LOCALHOST",
    "localhost.",
    "a.localhost",
    "printer.local",
    "Printer.LOCAL",
    "printer.local.",
    "nas.home.arpa",
    "home.arpa",
    "db.internal",
    "DB.Internal.",
    "router.lan",
    "router.LAN",
    "lan",
]
BAD_NAMES = [
    "",
    "under_score.example.org",
    "-lead.example.org",
    "trail-.example.org",
    "a..example.org",
    "example.org..",
    ("a" * 64) + ".example.org",
    ".".join(["a" * 63] * 4) + ".org",
    "ex%61mple.org",
    "exa mple.org",
    "пример.рф",
    "game.example.org:0",
    "game.example.org:65536",
    "game.example.org:",
    "game.example.org:http",
    "game.example.org:443:443",
]

CASES: list[tuple[str, str, str | None]] = [
    ("guide link", GOOD, None),
    ("with a port", endpoint_link("wss://game.example.org:8443/ws"), None),
    ("with a query", endpoint_link("wss://game.example.org/ws?room=1"), None),
    ("no path", endpoint_link("wss://game.example.org"), None),
    ("trailing dot", endpoint_link("wss://game.example.org./ws"), None),
    ("upper case host", endpoint_link("wss://Game.Example.ORG/ws"), None),
    ("punycode", endpoint_link("wss://xn--e1afmkfd.xn--p1ai/ws"), None),
    ("numeric label", endpoint_link("wss://123.example.org/ws"), None),
    ("unencoded endpoint", make_link(encode=False), None),
    ("22-char code", make_link(session="A" * 22), None),
    ("256-char code", make_link(session="a-_" * 85 + "Z"), None),
    ("scheme upper case", GOOD.replace("bringyourownagent:", "BringYourOwnAgent:"), None),
    ("too long", GOOD + "&x=" + "a" * 16 * 1024, "link-too-long"),
    ("empty", "", "not-a-link"),
    ("https link", "https://game.example.org/?v=0.1", "not-a-link"),
    ("other scheme", GOOD.replace("bringyourownagent:", "byoa:"), "not-a-link"),
    ("no slashes", GOOD.replace("://connect", ":connect"), "not-a-link"),
    ("other action", GOOD.replace("//connect?", "//pair?"), "not-a-link"),
    ("trailing slash", GOOD.replace("connect?", "connect/?"), "not-a-link"),
    ("leading space", " " + GOOD, "not-a-link"),
    ("newline", GOOD + "\n", "not-a-link"),
    ("non-ASCII", GOOD + "é", "not-a-link"),
    ("empty part", GOOD + "&", "not-a-link"),
    ("no equals", GOOD + "&flag", "not-a-link"),
    ("fragment", GOOD + "#x", "has-fragment"),
    ("empty fragment", GOOD + "#", "has-fragment"),
    ("repeated session", GOOD + "&session=" + SESSION, "repeated-parameter"),
    ("repeated v", GOOD + "&v=0.1", "repeated-parameter"),
    ("wrong version", make_link(version="0.2"), "wrong-version"),
    ("version 0.10", make_link(version="0.10"), "wrong-version"),
    ("version encoded", make_link(version="0%2E1"), "wrong-version"),
    ("empty version", make_link(version=""), "wrong-version"),
    ("unknown parameter", GOOD + "&x=1", "unknown-parameter"),
    ("encoded name", GOOD.replace("v=0.1", "%76=0.1"), "unknown-parameter"),
    ("upper case name", GOOD.replace("v=0.1", "V=0.1"), "unknown-parameter"),
    ("no version", GOOD.replace("v=0.1&", ""), "missing-parameter"),
    ("no endpoint", re.sub(r"&endpoint=[^&]*", "", GOOD), "missing-parameter"),
    ("no manifest", re.sub(r"&manifest=[^&]*", "", GOOD), "missing-parameter"),
    ("no session", re.sub(r"&session=[^&]*", "", GOOD), "missing-parameter"),
    ("no query", "bringyourownagent://connect?", "missing-parameter"),
    ("ws", endpoint_link("ws://game.example.org/ws"), "endpoint-not-wss"),
    ("http", endpoint_link("http://game.example.org/ws"), "endpoint-not-wss"),
    ("https", endpoint_link("https://game.example.org/ws"), "endpoint-not-wss"),
    ("no scheme", endpoint_link("game.example.org/ws"), "endpoint-not-wss"),
    ("wss: only", endpoint_link("wss:game.example.org/ws"), "endpoint-not-wss"),
    ("ws localhost", endpoint_link("ws://localhost:8080/ws"), "endpoint-not-wss"),
    ("userinfo", endpoint_link("wss://user:pw@game.example.org/ws"), "endpoint-invalid"),
    ("user only", endpoint_link("wss://evil.example@game.example.org/"), "endpoint-invalid"),
    ("endpoint fragment", endpoint_link("wss://game.example.org/ws#x"), "endpoint-invalid"),
    ("backslash", endpoint_link("wss://evil.example.org\\@game.example.org/"), "endpoint-invalid"),
    ("space in path", endpoint_link("wss://game.example.org/a b"), "endpoint-invalid"),
    (
        "bad UTF-8",
        make_link("wss%3A%2F%2Fgame.example.org%2F%FF", encode=False),
        "endpoint-invalid",
    ),
    ("single label", endpoint_link("wss://game/ws"), "endpoint-single-label"),
    ("single label dot", endpoint_link("wss://game./ws"), "endpoint-single-label"),
    ("plain code", make_link(session=SESSION[:21]), "session-invalid"),
    ("21-char code", make_link(session="A" * 21), "session-invalid"),
    ("257-char code", make_link(session="A" * 257), "session-invalid"),
    ("dot in code", make_link(session=SESSION[:-1] + "."), "session-invalid"),
    ("encoded code", make_link(session=SESSION[:-1] + "%41"), "session-invalid"),
    ("empty code", make_link(session=""), "session-invalid"),
]
CASES += [
    (f"IP {host}", endpoint_link(f"wss://{host}/ws"), "endpoint-ip-address")
    for host in IP_ADDRESSES
]
CASES += [
    (f"local {host}", endpoint_link(f"wss://{host}/ws"), "endpoint-local-name")
    for host in LOCAL_NAMES
]
CASES += [
    (f"bad name {host!r}", endpoint_link(f"wss://{host}/ws"), "endpoint-invalid")
    for host in BAD_NAMES
]


def manifest_cases() -> list[tuple[str, str, str | None]]:
    good = manifest64()
    padded = base64.urlsafe_b64encode(json.dumps(MANIFEST).encode()).decode()
    assert padded.endswith("=")
    standard = base64.b64encode(b"\xfb\xff" + json.dumps(MANIFEST).encode()).decode()
    assert "+" in standard and "/" in standard
    big = dict(MANIFEST, note="x")
    big["note"] = "x" * (4097 - len(json.dumps(big, separators=(",", ":"))) + 1)
    big_bytes = json.dumps(big, separators=(",", ":")).encode()
    assert len(big_bytes) == 4097
    at_limit = dict(big, note=big["note"][:-1])
    invalid = dict(MANIFEST, privacy="everyone")
    return [
        ("manifest padded", make_link(manifest=padded), "manifest-not-base64url"),
        (
            "manifest +",
            make_link(manifest=standard.rstrip("=").replace("/", "_")),
            "manifest-not-base64url",
        ),
        (
            "manifest /",
            make_link(manifest=standard.rstrip("=").replace("+", "-")),
            "manifest-not-base64url",
        ),
        (
            "manifest space",
            make_link(manifest=good[:10] + "%20" + good[10:]),
            "manifest-not-base64url",
        ),
        (
            "manifest encoded",
            make_link(manifest=good[:10] + "%41" + good[10:]),
            "manifest-not-base64url",
        ),
        (
            "manifest 4n+1 chars",
            make_link(manifest=good + "A" * (5 - len(good) % 4)),
            "manifest-not-base64url",
        ),
        (
            "manifest not canonical",
            make_link(manifest=b64url(b"{}")[:-1] + "1"),
            "manifest-not-base64url",
        ),
        (
            "manifest 4096 bytes",
            make_link(manifest=b64url(json.dumps(at_limit, separators=(",", ":")).encode())),
            None,
        ),
        ("manifest 4097 bytes", make_link(manifest=b64url(big_bytes)), "manifest-too-large"),
        ("manifest huge text", make_link(manifest="A" * 8000), "manifest-too-large"),
        ("manifest empty", make_link(manifest=""), "manifest-not-json"),
        ("manifest not JSON", make_link(manifest=b64url(b"{byoa: 1}")), "manifest-not-json"),
        ("manifest latin-1", make_link(manifest=b64url(b'{"a": "\xe9"}')), "manifest-not-json"),
        ("manifest BOM", make_link(manifest=b64url(b"\xef\xbb\xbf{}")), "manifest-not-json"),
        ("manifest NaN", make_link(manifest=b64url(b'{"a": NaN}')), "manifest-not-json"),
        (
            "manifest repeated key",
            make_link(
                manifest=b64url(json.dumps(MANIFEST)[:-1].encode() + b', "privacy": "public"}')
            ),
            "manifest-not-json",
        ),
        ("manifest deep", make_link(manifest=b64url(b"[" * 4000)), "manifest-not-json"),
        ("manifest array", make_link(manifest=manifest64([MANIFEST])), "manifest-not-object"),
        ("manifest string", make_link(manifest=manifest64("x")), "manifest-not-object"),
        ("manifest invalid", make_link(manifest=manifest64(invalid)), "manifest-invalid"),
        ("manifest empty object", make_link(manifest=manifest64({})), "manifest-invalid"),
    ]


CASES += manifest_cases()


@pytest.mark.parametrize(
    ("link", "code"), [(link, code) for _, link, code in CASES], ids=[name for name, _, _ in CASES]
)
def test_link_table(link: str, code: str | None) -> None:
    result = check_link(link, dev_local=False)
    assert (result.ok, result.code) == (code is None, code), result.message
    if code is None:
        assert result.message is None
    else:
        assert code in CODES
        assert result.message and "\n" not in result.message


def test_every_code_is_in_the_table() -> None:
    assert {code for _, _, code in CASES} - {None} == set(CODES)


def test_manifest_invalid_names_the_first_error() -> None:
    result = check_link(make_link(manifest=manifest64(dict(MANIFEST, privacy="everyone"))))
    assert result.code == "manifest-invalid"
    assert result.message is not None
    assert result.message.startswith("privacy-") and " at /privacy: " in result.message


def test_messages_do_not_echo_control_characters() -> None:
    manifest = dict(MANIFEST, byoa="0.9\nnext line\x1b[31m")
    result = check_link(make_link(manifest=manifest64(manifest)))
    assert result.code == "manifest-invalid"
    assert result.message is not None and result.message.isprintable()


def test_non_text_input_is_refused() -> None:
    for value in (None, b"bringyourownagent://connect?", 42, ["x"]):
        result = check_link(value)  # type: ignore[arg-type]
        assert result.code == "not-a-link"


@pytest.mark.parametrize(
    ("endpoint", "host", "port", "secure"),
    [
        ("ws://localhost:8080/byoa/ws", "localhost", 8080, False),
        ("ws://localhost/byoa/ws", "localhost", 80, False),
        ("ws://LOCALHOST:9/x", "localhost", 9, False),
        ("wss://localhost:8443/byoa/ws", "localhost", 8443, True),
    ],
)
def test_the_dev_switch_allows_localhost(
    endpoint: str, host: str, port: int, secure: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    link = endpoint_link(endpoint)
    result = check_link(link, dev_local=True)
    assert (result.ok, result.host, result.port, result.secure) == (True, host, port, secure)
    assert not check_link(link, dev_local=False).ok
    monkeypatch.setenv("BYOA_WALLET_DEV_LOCAL", "1")
    assert check_link(link).ok
    assert not check_link(link, dev_local=False).ok
    for other in ("0", "true", "yes", ""):
        monkeypatch.setenv("BYOA_WALLET_DEV_LOCAL", other)
        assert not check_link(link).ok
    monkeypatch.delenv("BYOA_WALLET_DEV_LOCAL")
    assert not check_link(link).ok


@pytest.mark.parametrize(
    ("endpoint", "code"),
    [
        ("ws://127.0.0.1:8080/ws", "endpoint-not-wss"),
        ("ws://[::1]:8080/ws", "endpoint-ip-address"),
        ("ws://a.localhost:8080/ws", "endpoint-not-wss"),
        ("ws://localhost.:8080/ws", "endpoint-not-wss"),
        ("ws://game.example.org/ws", "endpoint-not-wss"),
        ("wss://127.0.0.1/ws", "endpoint-ip-address"),
        ("wss://printer.local/ws", "endpoint-local-name"),
        ("wss://a.localhost/ws", "endpoint-local-name"),
        ("ws://user@localhost:8080/ws", "endpoint-invalid"),
        ("ws://localhost:0/ws", "endpoint-invalid"),
        ("http://localhost:8080/ws", "endpoint-not-wss"),
    ],
)
def test_the_dev_switch_loosens_nothing_else(endpoint: str, code: str) -> None:
    assert check_link(endpoint_link(endpoint), dev_local=True).code == code


def test_to_json() -> None:
    good = check_link(GOOD, dev_local=False).to_json()
    assert good == {
        "ok": True,
        "endpoint": "wss://game.example.org/byoa/ws",
        "host": "game.example.org",
        "port": 443,
        "path": "/byoa/ws",
        "secure": True,
        "manifest": MANIFEST,
        "manifestText": manifest64(),
        "session": SESSION,
    }
    bad = check_link(GOOD + "#").to_json()
    assert bad == {"ok": False, "code": "has-fragment", "message": bad["message"]}
    json.dumps(good)


def mutated_links() -> st.SearchStrategy[str]:
    """The good link with a few characters replaced, inserted or removed."""

    @st.composite
    def mutate(draw: st.DrawFn) -> str:
        text = GOOD
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(text)))
            piece = draw(st.text(max_size=3) | st.sampled_from(["%", "&", "=", "#", "%2F", "."]))
            cut = draw(st.integers(0, 3))
            text = text[:at] + piece + text[at + cut :]
        return text

    return mutate()


@settings(max_examples=400, deadline=None)
@given(st.text() | mutated_links(), st.booleans())
def test_any_text_gives_a_verdict(link: str, dev_local: bool) -> None:
    result = check_link(link, dev_local=dev_local)
    assert isinstance(result, LinkCheck)
    if result.ok:
        assert result.code is None and result.host and result.session
        assert isinstance(result.manifest, dict)
    else:
        assert result.code in CODES
        assert result.message and result.message.isprintable()
        assert not result.message.startswith("unreadable link")


def test_every_code_is_documented() -> None:
    text = (ROOT / "docs" / "link.md").read_text()
    text = text.split("## The checks and their codes", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", text, flags=re.MULTILINE))
    assert documented == set(CODES)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="byoa-skills")
    link_command.add_parser(parser.add_subparsers(dest="command", required=True))
    try:
        args = parser.parse_args(argv)
        status = args.run(args)
    except SystemExit as exit:
        status = exit.code  # type: ignore[assignment]
    return status, capsys.readouterr().out


def test_cli_valid(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run_cli(capsys, "link", "check", GOOD)
    assert status == 0
    assert (
        out == "ok: host game.example.org, skills audio.transcribe, session code of 32 characters\n"
    )
    assert SESSION not in out


def test_cli_refused(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run_cli(capsys, "link", "check", GOOD + "#x")
    assert status == 1
    assert out.startswith("has-fragment: ")


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = run_cli(capsys, "link", "check", "--json", GOOD)
    assert status == 0
    assert json.loads(out) == check_link(GOOD).to_json()
    status, out = run_cli(capsys, "link", "check", GOOD.replace("v=0.1", "v=2"), "--json")
    assert status == 1
    assert json.loads(out)["code"] == "wrong-version"


def test_cli_reads_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(GOOD + "\n"))
    assert run_cli(capsys, "link", "check", "-")[0] == 0


@pytest.mark.parametrize(
    "argv",
    [("link",), ("link", "check"), ("link", "check", "a", "b"), ("link", "check", "--nope", GOOD)],
)
def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    assert run_cli(capsys, *argv)[0] == 2
