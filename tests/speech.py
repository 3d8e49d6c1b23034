"""The committed speech clips and a tolerant way to compare what was heard with what was said."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

SPEECH = Path(__file__).parent / "data" / "speech"
CLIPS: list[dict[str, Any]] = json.loads((SPEECH / "clips.json").read_text(encoding="utf-8"))


def clips(kind: str | None = None, language: str | None = None) -> list[dict[str, Any]]:
    """The clips of this kind (sentence, human, country, silence, noise) and language."""
    return [
        clip
        for clip in CLIPS
        if kind in (None, clip["kind"]) and language in (None, clip["language"])
    ]


def skill_input(name: str) -> dict[str, Any]:
    """The ``audio.transcribe`` input of one clip."""
    text = base64.b64encode((SPEECH / name).read_bytes()).decode()
    return {"audio": {"mime": "audio/wav", "base64": text}}


def words(text: str) -> list[str]:
    """Lower-case words, punctuation dropped (any script)."""
    return re.findall(r"\w+", text.lower())


def word_recall(said: str, heard: str) -> float:
    """The share of the words said that were heard."""
    expected, got = words(said), set(words(heard))
    return sum(word in got for word in expected) / max(1, len(expected))
