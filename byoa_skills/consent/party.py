"""The party behind an origin: its registrable domain (``s1.example.org`` and
``s2.example.org`` are both ``example.org``), from the public suffix list that the
``publicsuffixlist`` package bundles (nothing is fetched at run time). Waiting consents are
counted per party, so one party with many subdomains holds one place on the visitor's desk
and never shuts another party's request out."""

from __future__ import annotations

import functools
import ipaddress
from typing import Any
from urllib.parse import urlsplit


@functools.cache
def _suffixes() -> Any:
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()


def party_of(origin: str) -> str:
    """The registrable domain of ``origin``'s host (``https://a.b.example.co.uk`` →
    ``example.co.uk``); the host itself for an IP address, a single label (``localhost``) or
    a public suffix, and ``origin`` itself when it has no host."""
    try:
        host = urlsplit(origin).hostname
    except ValueError:
        host = None
    if not host:
        return origin
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    return str(_suffixes().privatesuffix(host.rstrip(".")) or host)
