"""The site's manifests (the geography game's, the text mode's) and the
``bringyourownagent://`` link that carries one."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote

GEO_MANIFEST: dict[str, Any] = {
    "byoa": "0.1-draft",
    "purpose": {
        "summary": "Family geography game: recognise country names spoken aloud",
        "limits": {"maxClipSeconds": 15, "maxCallsPerMinute": 40},
    },
    "skills": {
        "audio.transcribe": {"languages": ["en", "ru", "sk"], "required": True},
    },
    "privacy": "personal-voice",
    "expectedCost": {"perSession": "0.05 USD"},
}

#: The text mode's manifest: one question for two models from different companies.
TEXT_MANIFEST: dict[str, Any] = {
    "byoa": "0.1-draft",
    "purpose": {
        "summary": "Ask two models from different makers one question and compare the answers",
        "limits": {"maxTextChars": 2000, "maxAnswerTokens": 256, "maxCallsPerMinute": 20},
    },
    "skills": {
        "text.generate": {
            "required": True,
            "models": {
                "count": 2,
                "required": 2,
                "differentCompanies": True,
                "why": "Each question goes to both models; the page shows each answer beside "
                "the code of the model that gave it",
                "prefer": ["llama", "qwen"],
            },
        },
    },
    "privacy": "personal",
    "expectedCost": {"perSession": "0.05 USD"},
}

#: The site's modes and the manifest each links with.
MANIFESTS: dict[str, dict[str, Any]] = {"geo": GEO_MANIFEST, "text": TEXT_MANIFEST}
#: The site's modes: ``geo`` (the geography game) and ``text`` (two models, one question).
MODES = tuple(MANIFESTS)

MAX_MANIFEST_BYTES = 4096


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """The manifest's JSON bytes as ``JSON.stringify`` writes them: compact, UTF-8."""
    return json.dumps(manifest, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def encode_manifest(manifest: dict[str, Any]) -> str:
    """Base64url of the manifest's JSON bytes without padding: the link's ``manifest``.

    Raises ValueError when the bytes exceed the 4096 the wallet accepts.
    """
    raw = manifest_bytes(manifest)
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ValueError(f"the manifest is {len(raw)} bytes; a link carries at most 4096")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_manifest(manifest64: str) -> dict[str, Any]:
    """The manifest a link's ``manifest`` parameter carries (the inverse of encode_manifest)."""
    padded = manifest64 + "=" * (-len(manifest64) % 4)
    return json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))


def encode_uri_component(text: str) -> str:
    """What JavaScript's ``encodeURIComponent`` makes of ``text``."""
    return quote(text, safe="-_.!~*'()")


def build_link(endpoint: str, manifest64: str, session: str) -> str:
    """The connect link: version, URL-encoded endpoint, manifest, one-time session code."""
    return (
        "bringyourownagent://connect?v=0.1"
        f"&endpoint={encode_uri_component(endpoint)}"
        f"&manifest={manifest64}&session={session}"
    )
