"""Manifests and grants for the shim's tests, in the shapes of the site guide."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any

GEO_MANIFEST: dict[str, Any] = {
    "byoa": "0.1-draft",
    "purpose": {
        "summary": "Family geography game: recognise country names spoken aloud",
        "limits": {"maxClipSeconds": 15, "maxCallsPerMinute": 40},
    },
    "skills": {
        "audio.transcribe": {"languages": ["en", "ru", "sk"], "required": True},
        "text.generate": {"required": False},
    },
    "privacy": "personal-voice",
    "expectedCost": {"perSession": "0.05 USD"},
}


def in_seconds(seconds: float) -> str:
    """An RFC 3339 instant ``seconds`` from now."""
    moment = datetime.now(timezone.utc) + timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def grant(**changes: Any) -> dict[str, Any]:
    """A grant of both skills for an hour, with ``changes`` on top (None removes a field)."""
    document: dict[str, Any] = {
        "byoa": "0.1-draft",
        "skills": ["audio.transcribe", "text.generate"],
        "budget": {"perSession": "0.20 USD"},
        "expiresAt": in_seconds(3600),
    }
    for key, value in changes.items():
        if value is None:
            document.pop(key, None)
        else:
            document[key] = value
    return document


def manifest(**limits: Any) -> dict[str, Any]:
    """The geography game's manifest with these ``purpose.limits`` added."""
    document = copy.deepcopy(GEO_MANIFEST)
    document["purpose"]["limits"].update(limits)
    return document
