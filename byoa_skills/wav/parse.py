"""Strict parsing of a 16 kHz mono 16-bit PCM WAV file from bytes.

The rules (docs/wav.md): a little-endian RIFF/WAVE file whose chunks are walked one by one;
exactly one ``fmt `` and one ``data`` chunk, the ``fmt `` first (RIFF WAVE requires it); other
chunks skipped with their pad byte; the
RIFF size, the chunk sizes and the bytes present agree exactly. Each chunk header moves the
walk at least 8 bytes forward, so the work is linear in the input's length.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from byoa_skills.wav.clip import MAX_CLIP_SECONDS, SAMPLE_RATE, Clip
from byoa_skills.wav.errors import WavError

_FORMAT_PCM = 0x0001
_FORMAT_EXTENSIBLE = 0xFFFE
#: KSDATAFORMAT_SUBTYPE_PCM, 00000001-0000-0010-8000-00aa00389b71, as stored in the file.
_SUBFORMAT_PCM = bytes.fromhex("0100000000001000800000aa00389b71")
_CHANNELS = 1
_BITS = 16
_BLOCK_ALIGN = 2
_BYTE_RATE = SAMPLE_RATE * _BLOCK_ALIGN

_RIFF_HEADER = struct.Struct("<4sI4s")
_CHUNK_HEADER = struct.Struct("<4sI")
_FMT_BASE = struct.Struct("<HHIIHH")
#: cbSize, valid bits, channel mask, sub-format: the 24 bytes after the base of an extensible fmt.
_FMT_EXTENSION = struct.Struct("<HHI16s")


def max_frames(max_seconds: float) -> int:
    """The most frames a clip of at most ``max_seconds`` may have."""
    if not (isinstance(max_seconds, (int, float)) and math.isfinite(max_seconds)):
        raise ValueError(f"max_seconds must be a finite number, not {max_seconds!r}")
    if max_seconds <= 0:
        raise ValueError(f"max_seconds must be positive, not {max_seconds!r}")
    return math.floor(max_seconds * SAMPLE_RATE + 1e-9)


def parse_wav(data: bytes | bytearray | memoryview, max_seconds: float = MAX_CLIP_SECONDS) -> Clip:
    """Parse ``data`` as a WAV clip the skill takes, or raise :class:`WavError`.

    The returned clip's samples are a view on ``data``: no sample is copied.
    """
    limit = max_frames(max_seconds)
    view = memoryview(data).cast("B")
    size = len(view)
    if size < 4 or view[:4] != b"RIFF":
        raise WavError("not-riff", "the data does not start with 'RIFF'")
    if size < _RIFF_HEADER.size:
        raise WavError("truncated", f"the RIFF header needs 12 bytes, only {size} present")
    _, riff_size, form = _RIFF_HEADER.unpack_from(view, 0)
    if form != b"WAVE":
        raise WavError("not-wave", f"the RIFF form type is {_show(form)}, not 'WAVE'")
    end = 8 + riff_size
    if end > size:
        raise WavError("truncated", f"the RIFF size says {end} bytes, only {size} present")
    if end < size:
        raise WavError("trailing-bytes", f"{size - end} bytes after the RIFF size's end")

    has_fmt = False
    data_first = False
    data_at: int | None = None
    data_size = 0
    offset = _RIFF_HEADER.size
    while offset < end:
        if end - offset < _CHUNK_HEADER.size:
            raise WavError("truncated", f"a chunk header at byte {offset} is cut short")
        chunk_id, chunk_size = _CHUNK_HEADER.unpack_from(view, offset)
        body = offset + _CHUNK_HEADER.size
        if chunk_size > end - body:
            raise WavError(
                "truncated",
                f"chunk {_show(chunk_id)} at byte {offset} says {chunk_size} bytes, "
                f"only {end - body} present",
            )
        if chunk_id == b"fmt ":
            if has_fmt:
                raise WavError("duplicate-chunk", "a second 'fmt ' chunk")
            has_fmt = True
            _check_fmt(view[body : body + chunk_size])
        elif chunk_id == b"data":
            if data_at is not None:
                raise WavError("duplicate-chunk", "a second 'data' chunk")
            data_first = data_first or not has_fmt
            if chunk_size % _BLOCK_ALIGN:
                raise WavError(
                    "partial-frame", f"the data chunk's {chunk_size} bytes are not whole frames"
                )
            data_at, data_size = body, chunk_size
        padded = chunk_size + (chunk_size & 1)
        if padded > end - body:
            raise WavError("truncated", f"chunk {_show(chunk_id)} lacks its pad byte")
        offset = body + padded

    if not has_fmt:
        raise WavError("missing-fmt", "no 'fmt ' chunk")
    if data_at is None:
        raise WavError("missing-data", "no 'data' chunk")
    if data_first:
        raise WavError("data-before-fmt", "the 'data' chunk comes before the 'fmt ' chunk")
    frames = data_size // _BLOCK_ALIGN
    if frames == 0:
        raise WavError("empty", "the data chunk holds no frames")
    if frames > limit:
        raise WavError(
            "too-long",
            f"the clip lasts {frames / SAMPLE_RATE:.3f} s, longer than the limit of "
            f"{max_seconds:g} s",
        )
    return Clip(np.frombuffer(view, dtype="<i2", count=frames, offset=data_at))


def _check_fmt(fmt: memoryview) -> None:
    """Check the body of the ``fmt `` chunk, or raise :class:`WavError`."""
    if len(fmt) < _FMT_BASE.size:
        raise WavError("bad-fmt", f"the fmt chunk has {len(fmt)} bytes, fewer than 16")
    tag, channels, rate, byte_rate, block_align, bits = _FMT_BASE.unpack_from(fmt, 0)
    if tag == _FORMAT_PCM:
        _check_pcm_extension_size(fmt)
    elif tag == _FORMAT_EXTENSIBLE:
        _check_extensible(fmt, channels, bits)
    else:
        raise WavError("not-pcm", f"format tag 0x{tag:04x} is not PCM (0x0001)")
    if channels != _CHANNELS:
        raise WavError("not-mono", f"{channels} channels, not 1")
    if rate != SAMPLE_RATE:
        raise WavError("wrong-rate", f"{rate} Hz, not {SAMPLE_RATE} Hz")
    if bits != _BITS:
        raise WavError("wrong-bits", f"{bits}-bit samples, not 16-bit")
    if block_align != _BLOCK_ALIGN:
        raise WavError("bad-block-align", f"block align {block_align}, not {_BLOCK_ALIGN}")
    if byte_rate != _BYTE_RATE:
        raise WavError("bad-byte-rate", f"byte rate {byte_rate}, not {_BYTE_RATE}")


def _check_pcm_extension_size(fmt: memoryview) -> None:
    """Plain PCM: 16 bytes, or 18 with an empty extension (cbSize 0)."""
    if len(fmt) == _FMT_BASE.size:
        return
    if len(fmt) == _FMT_BASE.size + 2 and fmt[16] == 0 and fmt[17] == 0:
        return
    raise WavError("bad-fmt", f"a PCM fmt chunk of {len(fmt)} bytes (16, or 18 with cbSize 0)")


def _check_extensible(fmt: memoryview, channels: int, bits: int) -> None:
    """WAVE_FORMAT_EXTENSIBLE: 40 bytes, cbSize 22, PCM sub-format, 16 valid bits, one speaker."""
    if len(fmt) != _FMT_BASE.size + _FMT_EXTENSION.size:
        raise WavError("bad-fmt", f"an extensible fmt chunk of {len(fmt)} bytes, not 40")
    extension_size, valid_bits, channel_mask, subformat = _FMT_EXTENSION.unpack_from(
        fmt, _FMT_BASE.size
    )
    if extension_size != _FMT_EXTENSION.size - 2:
        raise WavError("bad-fmt", f"an extensible fmt chunk with cbSize {extension_size}, not 22")
    if subformat != _SUBFORMAT_PCM:
        raise WavError("not-pcm", "the extensible sub-format is not PCM")
    if bits == _BITS and valid_bits != _BITS:
        raise WavError("wrong-bits", f"{valid_bits} valid bits in 16-bit containers, not 16")
    if channels == _CHANNELS and channel_mask.bit_count() > 1:
        raise WavError("not-mono", f"channel mask 0x{channel_mask:x} names several speakers")


def _show(tag: bytes) -> str:
    """A four-byte tag as printable text for a message."""
    return repr(tag.decode("latin-1"))
