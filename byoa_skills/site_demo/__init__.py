"""The reference site of the direct link: the family geography game and its BYOA server.

It does what the site guide's minimal Node.js server does: one-time session codes, the
``bringyourownagent://`` link, the wallet's WebSocket (hello, welcome, call, result, bye),
and a page that records a country name and has the visitor's wallet transcribe it.
"""

from __future__ import annotations

from .app import build_app, start_site
from .codes import CodeBook, RateLimiter
from .connection import DEFAULT_PARALLEL_CALLS, WalletConnection
from .demo import SiteDemo
from .manifest import GEO_MANIFEST, build_link, encode_manifest

__all__ = [
    "DEFAULT_PARALLEL_CALLS",
    "GEO_MANIFEST",
    "CodeBook",
    "RateLimiter",
    "SiteDemo",
    "WalletConnection",
    "build_app",
    "build_link",
    "encode_manifest",
    "start_site",
]
