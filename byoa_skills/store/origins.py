"""Origins as browsers write them: the one normaliser that the site list, grants, activity
and every way in name a site by."""

from __future__ import annotations

import ipaddress
import re

SCHEMES = {"http": 80, "https": 443}
_ORIGIN = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<host>\[[^\]]*\]|[^:]*)(?::(?P<port>.*))?"
)
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def normalize_origin(origin: str) -> str:
    """``origin`` as a browser writes it: ``scheme://host[:port]`` in lower case, without the
    scheme's default port. Raises ``ValueError`` with a plain message for anything else.

    Only ``http`` and ``https`` are origins here; the host is a DNS name in ASCII (punycode
    for international names), an IPv4 address, or an IPv6 address in brackets.
    """
    if not isinstance(origin, str):
        raise ValueError(f"an origin is a string, not {type(origin).__name__}")
    text = origin.strip().lower()
    example = "an origin looks like https://game.example.org or http://localhost:8080"
    if "://" not in text:
        raise ValueError(f"not an origin: {origin!r} ({example})")
    scheme, rest = text.split("://", 1)
    if scheme not in SCHEMES:
        raise ValueError(f"not an origin: {origin!r} (the scheme must be http or https)")
    if any(mark in rest for mark in "/?#"):
        cut = min(rest.find(mark) for mark in "/?#" if mark in rest)
        raise ValueError(
            f"not an origin: {origin!r} (an origin has no path, query or fragment: "
            f"did you mean {scheme}://{rest[:cut]}?)"
        )
    if "@" in rest:
        raise ValueError(f"not an origin: {origin!r} (an origin has no user name or password)")
    match = _ORIGIN.fullmatch(text)
    if match is None:
        raise ValueError(f"not an origin: {origin!r} ({example})")
    host = _check_host(match["host"], origin)
    port = match["port"]
    if port is None:
        return f"{scheme}://{host}"
    if not port.isdigit() or not port.isascii() or not 0 < int(port) < 65536:
        raise ValueError(f"not an origin: {origin!r} (the port must be a number 1 to 65535)")
    number = int(port)
    if number == SCHEMES[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{number}"


def _check_host(host: str, origin: str) -> str:
    if host.startswith("["):
        try:
            address = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f"not an origin: {origin!r} (not an IPv6 address: {host})") from None
        return f"[{address.compressed}]"
    if not host:
        raise ValueError(f"not an origin: {origin!r} (the host is missing)")
    if not host.isascii():
        raise ValueError(
            f"not an origin: {origin!r} (write an international host name in its ASCII "
            f"form, xn--...)"
        )
    labels = host.split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"not an origin: {origin!r} (not a host name: {host})")
    if labels[-1].isdigit():  # a browser reads such a host as an IPv4 address
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"not an origin: {origin!r} (not an IPv4 address: {host})") from None
    return host
