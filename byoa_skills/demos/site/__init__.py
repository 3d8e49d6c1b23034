"""The reference site of the direct link: the family geography game and its BYOA server.

It does what the site guide's minimal Node.js server does: one-time session codes, the
``bringyourownagent://`` link, the wallet's WebSocket (hello, welcome, call, result, grant,
bye), and a page that records a country name and has the visitor's wallet transcribe it; in
its text mode, a page that asks two models from different companies one question and shows
each answer beside the code of the model that gave it.
"""

from __future__ import annotations

from byoa_skills.demos.rate import RateLimiter
from byoa_skills.demos.site.app import build_app, start_site
from byoa_skills.demos.site.codes import CodeBook
from byoa_skills.demos.site.connection import DEFAULT_PARALLEL_CALLS, WalletConnection
from byoa_skills.demos.site.demo import SiteDemo
from byoa_skills.demos.site.manifest import (
    GEO_MANIFEST,
    MODES,
    TEXT_MANIFEST,
    build_link,
    encode_manifest,
)

__all__ = [
    "DEFAULT_PARALLEL_CALLS",
    "GEO_MANIFEST",
    "MODES",
    "TEXT_MANIFEST",
    "CodeBook",
    "RateLimiter",
    "SiteDemo",
    "WalletConnection",
    "build_app",
    "build_link",
    "encode_manifest",
    "start_site",
]
