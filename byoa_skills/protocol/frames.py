"""Every frame of the direct link and the local API's WebSocket."""

from __future__ import annotations

from typing import Any


def chunk_frame(call_id: Any, choice: int, text: str) -> dict[str, Any]:
    """The frame that carries one piece of a streamed answer before its ``result``;
    ``choice`` is named only for the alternatives after the first."""
    frame: dict[str, Any] = {"type": "chunk", "id": call_id, "text": text}
    if choice:
        frame["choice"] = choice
    return frame
