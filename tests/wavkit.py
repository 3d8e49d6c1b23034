"""Builders of WAV files, good and bad, for the tests."""

from __future__ import annotations

import struct

import numpy as np

PCM_GUID = bytes.fromhex("0100000000001000800000aa00389b71")
FLOAT_GUID = bytes.fromhex("0300000000001000800000aa00389b71")


def fmt_body(
    tag: int = 1,
    channels: int = 1,
    rate: int = 16000,
    byte_rate: int = 32000,
    block_align: int = 2,
    bits: int = 16,
) -> bytes:
    """The 16-byte body of a plain ``fmt `` chunk."""
    return struct.pack("<HHIIHH", tag, channels, rate, byte_rate, block_align, bits)


def extensible_fmt_body(
    valid_bits: int = 16,
    mask: int = 4,
    guid: bytes = PCM_GUID,
    cb_size: int = 22,
    **base: int,
) -> bytes:
    """The 40-byte body of a WAVE_FORMAT_EXTENSIBLE ``fmt `` chunk."""
    return fmt_body(tag=0xFFFE, **base) + struct.pack("<HHI16s", cb_size, valid_bits, mask, guid)


def chunk(chunk_id: bytes, body: bytes, size: int | None = None, pad: bool = True) -> bytes:
    """One chunk; ``size`` overrides the stated size; odd bodies get a pad byte unless ``pad``
    is false."""
    stated = len(body) if size is None else size
    pad_byte = b"\0" if pad and len(body) % 2 else b""
    return struct.pack("<4sI", chunk_id, stated) + body + pad_byte


def riff(*chunks: bytes, riff_size: int | None = None, form: bytes = b"WAVE") -> bytes:
    """A RIFF file of these chunks; ``riff_size`` overrides the stated size."""
    body = form + b"".join(chunks)
    return struct.pack("<4sI", b"RIFF", len(body) if riff_size is None else riff_size) + body


def pcm(frames: int, seed: int = 0) -> bytes:
    """``frames`` little-endian int16 samples of seeded noise."""
    rng = np.random.default_rng(seed)
    return rng.integers(-32768, 32768, size=frames, dtype=np.int16).astype("<i2").tobytes()


def wav(frames: int = 1600, seed: int = 0) -> bytes:
    """A valid plain WAV of ``frames`` frames."""
    return riff(chunk(b"fmt ", fmt_body()), chunk(b"data", pcm(frames, seed)))
