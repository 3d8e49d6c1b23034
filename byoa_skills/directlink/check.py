"""The checks a ``bringyourownagent://connect`` link passes before the wallet shows anything.

A link carries the site's WebSocket endpoint, its manifest and a one-time session code::

    bringyourownagent://connect?v=0.1&endpoint=wss%3A%2F%2Fgame.example.org%2Fbyoa%2Fws
        &manifest=<base64url of the manifest's JSON bytes>&session=<one-time code>

:func:`check_link` runs every check on the text alone: it resolves no name and contacts
nothing. The address the name resolves to is checked again when the wallet connects.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import os
import re
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from bringyourownagent import validate_manifest

from byoa_skills.protocol.refusal import Refusal

#: The environment switch that also allows ``ws://localhost`` endpoints, for local tests.
DEV_LOCAL_ENV = "BYOA_WALLET_DEV_LOCAL"

VERSION = "0.1"
PREFIX = "bringyourownagent://connect?"
PARAMETERS = ("v", "endpoint", "manifest", "session")
MAX_LINK_CHARS = 16 * 1024
MAX_MANIFEST_BYTES = 4096
#: The longest base64url text (no padding) of at most :data:`MAX_MANIFEST_BYTES` bytes.
MAX_MANIFEST_CHARS = (MAX_MANIFEST_BYTES * 4 + 2) // 3
MAX_HOST_CHARS = 253
LOCAL_SUFFIXES = ("localhost", "local", "home.arpa", "internal", "lan")

#: Every code :func:`check_link` gives for a refused link.
CODES = (
    "link-too-long",
    "not-a-link",
    "has-fragment",
    "repeated-parameter",
    "wrong-version",
    "unknown-parameter",
    "missing-parameter",
    "endpoint-not-wss",
    "endpoint-invalid",
    "endpoint-ip-address",
    "endpoint-local-name",
    "endpoint-single-label",
    "manifest-too-large",
    "manifest-not-base64url",
    "manifest-not-json",
    "manifest-not-object",
    "manifest-invalid",
    "session-invalid",
)

_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")
_SESSION = re.compile(r"[A-Za-z0-9_-]{22,256}")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
_HOST_CHARS = re.compile(r"[a-z0-9.-]+")
_PORT = re.compile(r"[0-9]{1,5}")
# What RFC 3986 allows in a path and query: unreserved, sub-delims, ":@/?" and %HH escapes.
_PATH = re.compile(r"(?:[A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*")
_PRINTABLE_ASCII = re.compile(r"[\x21-\x7e]*")


@dataclass(frozen=True)
class LinkCheck:
    """The verdict on one link: ``ok`` with its parts, or a ``code`` and a one-line message.

    ``manifest_text`` is the base64url string exactly as the link carries it: the site's
    welcome must echo it byte for byte. ``path`` is the endpoint's path and query.
    """

    ok: bool
    code: str | None = None
    message: str | None = None
    endpoint: str | None = None
    host: str | None = None
    port: int | None = None
    path: str | None = None
    secure: bool | None = None
    manifest: dict[str, Any] | None = None
    manifest_text: str | None = None
    session: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The verdict as a JSON object (camelCase keys); the parts only for a valid link."""
        if not self.ok:
            return {"ok": False, "code": self.code, "message": self.message}
        return {
            "ok": True,
            "endpoint": self.endpoint,
            "host": self.host,
            "port": self.port,
            "path": self.path,
            "secure": self.secure,
            "manifest": self.manifest,
            "manifestText": self.manifest_text,
            "session": self.session,
        }


class _Refused(Refusal):
    """A link that fails a check: its code and message."""


def check_link(link: str, *, dev_local: bool | None = None) -> LinkCheck:
    """Check ``link`` as the wallet does before it shows the visitor anything; never raises.

    ``dev_local`` (default: the environment variable ``BYOA_WALLET_DEV_LOCAL`` is ``"1"``)
    also allows ``ws://localhost[:port]`` and ``wss://localhost[:port]``; nothing else.
    """
    if dev_local is None:
        dev_local = os.environ.get(DEV_LOCAL_ENV) == "1"
    try:
        return _check(link, dev_local)
    except _Refused as refused:
        return LinkCheck(ok=False, code=refused.code, message=refused.message)
    except Exception as error:  # a bug must refuse the link, never pass it or crash
        return LinkCheck(ok=False, code="not-a-link", message=f"unreadable link ({_clip(error)})")


def _check(link: object, dev_local: bool) -> LinkCheck:
    if not isinstance(link, str):
        raise _Refused("not-a-link", "the link is not text")
    if len(link) > MAX_LINK_CHARS:
        raise _Refused("link-too-long", f"the link is longer than {MAX_LINK_CHARS} characters")
    if not _PRINTABLE_ASCII.fullmatch(link):
        raise _Refused("not-a-link", "the link holds a space, a control or a non-ASCII character")
    if link[: len(PREFIX)].lower() != PREFIX:
        raise _Refused("not-a-link", f"the link does not start with {PREFIX}")
    if "#" in link:
        raise _Refused("has-fragment", "the link has a fragment (#)")
    params = _parameters(link[len(PREFIX) :])

    version = params.get("v")
    if version is not None and version != VERSION:
        raise _Refused("wrong-version", f"the link's version is not {VERSION}: {_clip(version)}")
    unknown = [name for name in params if name not in PARAMETERS]
    if unknown:
        raise _Refused("unknown-parameter", f"unknown parameter: {_clip(unknown[0])}")
    missing = [name for name in PARAMETERS if name not in params]
    if missing:
        raise _Refused("missing-parameter", f"missing parameter: {missing[0]}")

    endpoint, host, port, path, secure = _check_endpoint(params["endpoint"], dev_local)
    manifest = _check_manifest(params["manifest"])
    session = params["session"]
    if not _SESSION.fullmatch(session):
        raise _Refused(
            "session-invalid",
            f"the session code is not 22 to 256 of A-Z a-z 0-9 - _ ({len(session)} characters)",
        )
    return LinkCheck(
        ok=True,
        endpoint=endpoint,
        host=host,
        port=port,
        path=path,
        secure=secure,
        manifest=manifest,
        manifest_text=params["manifest"],
        session=session,
    )


def _parameters(query: str) -> dict[str, str]:
    """The query's ``name=value`` pairs, raw (names are not decoded); refuses repeats."""
    params: dict[str, str] = {}
    if not query:
        return params
    for part in query.split("&"):
        name, equals, value = part.partition("=")
        if not name or not equals:
            raise _Refused("not-a-link", "the link's query is not name=value pairs joined by &")
        if name in params:
            raise _Refused("repeated-parameter", f"repeated parameter: {_clip(name)}")
        params[name] = value
    return params


def _check_endpoint(raw: str, dev_local: bool) -> tuple[str, str, int, str, bool]:
    """``(endpoint, host, port, path, secure)`` of the endpoint parameter, decoded once."""
    try:
        endpoint = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise _Refused("endpoint-invalid", "the endpoint is not UTF-8 once decoded") from None
    scheme, sep, rest = endpoint.partition("://")
    scheme = scheme.lower()
    allowed = ("wss", "ws") if dev_local else ("wss",)
    if not sep or scheme not in allowed:
        raise _Refused("endpoint-not-wss", "the endpoint is not a wss:// URL")
    if not _PRINTABLE_ASCII.fullmatch(endpoint):
        raise _Refused(
            "endpoint-invalid",
            "the endpoint holds a space, a control or a non-ASCII character "
            "(write an international name in its xn-- form)",
        )
    if "#" in endpoint:
        raise _Refused("endpoint-invalid", "the endpoint has a fragment (#)")
    if "\\" in endpoint:
        raise _Refused("endpoint-invalid", "the endpoint holds a backslash")

    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, path = rest[:cut], rest[cut:]
    if "@" in authority:
        raise _Refused("endpoint-invalid", "the endpoint has a user name or password (@)")
    if not _PATH.fullmatch(path):
        raise _Refused("endpoint-invalid", "the endpoint's path holds characters a URL cannot")
    path = path if path.startswith("/") else "/" + path

    if authority.startswith("[") or (authority.count(":") > 1 and _is_ip_address(authority)):
        raise _Refused("endpoint-ip-address", "the endpoint's host is an IPv6 address")
    if authority.count(":") > 1:
        raise _Refused("endpoint-invalid", "the endpoint's host and port are not host:port")
    host, colon, port_text = authority.partition(":")
    port = 443 if scheme == "wss" else 80
    if colon:
        if not _PORT.fullmatch(port_text) or not 1 <= int(port_text) <= 65535:
            raise _Refused(
                "endpoint-invalid", f"the endpoint's port is not 1-65535: {_clip(port_text)}"
            )
        port = int(port_text)

    host = host.lower()
    if dev_local and host == "localhost":
        return endpoint, host, port, path, scheme == "wss"
    if scheme != "wss":
        raise _Refused("endpoint-not-wss", "the endpoint is not a wss:// URL")
    return endpoint, _check_host(host), port, path, True


def _check_host(host: str) -> str:
    """``host`` (in lower case) without its trailing dot; refuses all but a public DNS name."""
    if host.endswith("."):
        host = host[:-1]
    if not host:
        raise _Refused("endpoint-invalid", "the endpoint has no host")
    if not _HOST_CHARS.fullmatch(host):
        if "%" in host and _is_ip_address(unquote(host)):
            raise _Refused("endpoint-ip-address", "the endpoint's host is an IP address")
        raise _Refused(
            "endpoint-invalid", f"the endpoint's host is not a valid DNS name: {_clip(host)}"
        )
    if _is_ip_address(host):
        raise _Refused("endpoint-ip-address", f"the endpoint's host is an IP address: {host}")
    for suffix in LOCAL_SUFFIXES:
        if host == suffix or host.endswith("." + suffix):
            raise _Refused("endpoint-local-name", f"the endpoint's host is a local name: {host}")
    if "." not in host:
        raise _Refused(
            "endpoint-single-label", f"the endpoint's host is a single-label name: {_clip(host)}"
        )
    if len(host) > MAX_HOST_CHARS or not all(_LABEL.fullmatch(label) for label in host.split(".")):
        raise _Refused(
            "endpoint-invalid", f"the endpoint's host is not a valid DNS name: {_clip(host)}"
        )
    return host


def _is_ip_address(host: str) -> bool:
    """Whether any parser could take ``host`` for an IP address.

    Besides what ``ipaddress`` and ``inet_aton`` take (``127.1``, ``0x7f.0.0.1``,
    ``0177.0.0.1``, ``2130706433``), a name whose last label is a number is taken by URL
    parsers as IPv4 (or refused); no real top-level domain is numeric.
    """
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        socket.inet_aton(host)
        return True
    except (OSError, ValueError):
        pass
    return bool(_NUMERIC_LABEL.fullmatch(host.rsplit(".", 1)[-1]))


def _check_manifest(text: str) -> dict[str, Any]:
    """The manifest the base64url ``text`` carries, checked by the draft rules."""
    if len(text) > MAX_MANIFEST_CHARS:
        raise _Refused(
            "manifest-too-large", f"the manifest is larger than {MAX_MANIFEST_BYTES} bytes"
        )
    if not _BASE64URL.fullmatch(text) or len(text) % 4 == 1:
        raise _Refused(
            "manifest-not-base64url",
            "the manifest is not base64url without padding (A-Z a-z 0-9 - _ only)",
        )
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise _Refused("manifest-not-base64url", "the manifest is not base64url") from None
    if base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii") != text:
        raise _Refused("manifest-not-base64url", "the manifest's base64url is not canonical")
    if len(data) > MAX_MANIFEST_BYTES:
        raise _Refused(
            "manifest-too-large", f"the manifest is larger than {MAX_MANIFEST_BYTES} bytes"
        )
    try:
        manifest = json.loads(
            data.decode("utf-8"),
            object_pairs_hook=_object_without_repeats,
            parse_constant=_no_constant,
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise _Refused(
            "manifest-not-json", f"the manifest is not UTF-8 JSON: {_clip(error)}"
        ) from None
    if not isinstance(manifest, dict):
        raise _Refused("manifest-not-object", "the manifest is not a JSON object")
    try:
        result = validate_manifest(manifest)
    except Exception as error:
        raise _Refused(
            "manifest-invalid", f"the manifest cannot be validated: {_clip(error)}"
        ) from None
    if not result.get("ok"):
        errors = result.get("errors") or [{}]
        first = errors[0]
        raise _Refused(
            "manifest-invalid",
            f"{_clip(first.get('code'))} at {_clip(first.get('path'))}: "
            f"{_clip(first.get('message'))}",
        )
    return manifest


def _object_without_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("a key is repeated in an object")
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _clip(value: object, limit: int = 120) -> str:
    """``value`` as one short printable line, for a message."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."
