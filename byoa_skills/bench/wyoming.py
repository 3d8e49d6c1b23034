"""A minimal client of the Wyoming protocol (the Home Assistant voice services' protocol).

Each event is one JSON line ``{"type": ..., "version": ..., "data_length": N,
"payload_length": M}`` followed by ``N`` bytes of JSON data and ``M`` bytes of binary
payload (either length absent means 0). A transcription is ``transcribe``, ``audio-start``,
``audio-chunk`` events carrying 16-bit PCM, ``audio-stop``; the server answers
``transcript`` with ``{"text": ...}``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

VERSION = "1.10.2"
CHUNK_BYTES = 2048  # 64 ms of 16 kHz 16-bit mono, the size Wyoming clients commonly send


def encode_event(kind: str, data: dict[str, Any] | None = None, payload: bytes = b"") -> bytes:
    """One event on the wire."""
    header: dict[str, Any] = {"type": kind, "version": VERSION}
    data_bytes = json.dumps(data).encode() if data else b""
    if data_bytes:
        header["data_length"] = len(data_bytes)
    if payload:
        header["payload_length"] = len(payload)
    return json.dumps(header).encode() + b"\n" + data_bytes + payload


async def read_event(reader: asyncio.StreamReader) -> tuple[str, dict[str, Any], bytes]:
    """The next event: ``(type, data, payload)``; raises ``ConnectionError`` at the end."""
    line = await reader.readline()
    if not line:
        raise ConnectionError("the Wyoming server closed the connection")
    header = json.loads(line)
    data = dict(header.get("data") or {})
    if header.get("data_length"):
        data.update(json.loads(await reader.readexactly(header["data_length"])))
    payload = b""
    if header.get("payload_length"):
        payload = await reader.readexactly(header["payload_length"])
    return header["type"], data, payload


async def describe(host: str, port: int, timeout: float = 10) -> dict[str, Any]:
    """Ask the server what it offers (``describe`` → ``info``)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        writer.write(encode_event("describe"))
        await writer.drain()
        while True:
            kind, data, _ = await asyncio.wait_for(read_event(reader), timeout)
            if kind == "info":
                return data
    finally:
        writer.close()


async def transcribe(
    host: str, port: int, pcm: bytes, language: str | None = None, timeout: float = 300
) -> str:
    """The text of 16 kHz mono 16-bit PCM ``pcm``, over a fresh connection."""
    reader, writer = await asyncio.open_connection(host, port)
    audio = {"rate": 16000, "width": 2, "channels": 1}
    try:
        writer.write(encode_event("transcribe", {"language": language} if language else None))
        writer.write(encode_event("audio-start", audio))
        for start in range(0, len(pcm), CHUNK_BYTES):
            writer.write(encode_event("audio-chunk", audio, pcm[start : start + CHUNK_BYTES]))
        writer.write(encode_event("audio-stop"))
        await writer.drain()
        while True:
            kind, data, _ = await asyncio.wait_for(read_event(reader), timeout)
            if kind == "transcript":
                return str(data.get("text", ""))
    finally:
        writer.close()
