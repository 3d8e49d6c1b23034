"""Strict base64: the canonical standard alphabet with padding, nothing else."""

from __future__ import annotations

import binascii

from .errors import WavError

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def decoded_size_bound(text_length: int) -> int:
    """The most bytes a canonical base64 text of ``text_length`` characters decodes to."""
    return text_length // 4 * 3


def encoded_length(byte_count: int) -> int:
    """The length of the canonical base64 text of ``byte_count`` bytes."""
    return (byte_count + 2) // 3 * 4


def decode_strict(text: str) -> bytes:
    """Decode canonical base64 or raise :class:`WavError` with code ``bad-base64``.

    Refused: any character outside ``A-Z a-z 0-9 + /`` (whitespace, url-safe ``-`` ``_``, a
    ``data:`` prefix), missing or extra padding, and non-zero unused bits in the last group
    (so each byte string has exactly one accepted spelling).
    """
    try:
        raw = text.encode("ascii")
    except UnicodeEncodeError:
        raise WavError("bad-base64", "the base64 text has non-ASCII characters") from None
    padding = 2 if raw.endswith(b"==") else 1 if raw.endswith(b"=") else 0
    body = raw[: len(raw) - padding]
    stray = body.translate(None, _ALPHABET)
    if stray:
        at = body.index(stray[:1])
        raise WavError(
            "bad-base64", f"character {chr(stray[0])!r} at {at} is not in the standard alphabet"
        )
    if len(raw) % 4:
        raise WavError("bad-base64", f"the base64 text's length {len(raw)} is not a multiple of 4")
    if padding and _ALPHABET.index(body[-1]) & (0b1111 if padding == 2 else 0b11):
        raise WavError("bad-base64", "the last base64 group has non-zero unused bits")
    try:
        return binascii.a2b_base64(raw)
    except binascii.Error as error:  # not reached after the checks above; kept as a guard
        raise WavError("bad-base64", f"the base64 text does not decode: {error}") from None
