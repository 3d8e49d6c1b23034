"""Helpers for text tests: a sources file, a runtime on it, and one call."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from byoa_skills.runtimes.text import SourceStore, TextAnswer, TextCall, TextFailure, TextRuntime


def sources_file(path: Path, *sources: dict[str, Any], default: str | None = None) -> Path:
    """Write a sources file holding ``sources``."""
    body: dict[str, Any] = {"sources": list(sources)}
    if default:
        body["default"] = default
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body))
    return path


def ask(text: str, role: str = "user") -> list[dict[str, str]]:
    return [{"role": "system", "content": "Answer briefly."}, {"role": role, "content": text}]


def generate(
    path: Path, model: str, text: str, stream: bool = False, **changes: Any
) -> tuple[TextAnswer | TextFailure, list[tuple[int, str]]]:
    """One call on a fresh runtime: the answer (or the failure) and the streamed pieces."""
    pieces: list[tuple[int, str]] = []

    async def on_chunk(choice: int, piece: str) -> None:
        pieces.append((choice, piece))

    async def run() -> TextAnswer | TextFailure:
        runtime = TextRuntime(SourceStore(path))
        call = TextCall(
            model=model, messages=ask(text), max_tokens=changes.pop("max_tokens", 64), **changes
        )
        try:
            return await runtime.generate(call, on_chunk if stream else None)
        except TextFailure as failure:
            return failure
        finally:
            await runtime.close()

    return asyncio.run(run()), pieces


def code_of(outcome: Any) -> str | None:
    return outcome.code if isinstance(outcome, TextFailure) else None


def wait_for(condition: Callable[[], bool], seconds: float = 30) -> bool:
    """Poll ``condition`` until it holds (a wait for another thread, not a measurement)."""
    import time

    limit = time.monotonic() + seconds
    while time.monotonic() < limit:
        if condition():
            return True
        time.sleep(0.02)
    return condition()
