"""Compact JWS with EdDSA over Ed25519, through joserfc: the one place the connector signs
and verifies, so every signature it makes or takes uses the same algorithm and checks.

The binding names EdDSA, and DPoP (RFC 9449) deployments send ``"alg": "EdDSA"``. joserfc
warns that RFC 9864 deprecates that polymorphic name in favour of ``Ed25519``; the warning is
silenced here only, because the curve is fixed: every key is checked to be Ed25519 first.
"""

from __future__ import annotations

import base64
import hashlib
import json
import warnings
from typing import Any

from joserfc import jws
from joserfc.errors import JoseError, SecurityWarning
from joserfc.jwk import OKPKey

ALGORITHM = "EdDSA"
#: Bytes a compact JWS may have before it is read at all.
MAX_TOKEN = 8192


def sign(header: dict[str, Any], payload: bytes, key: OKPKey) -> str:
    """A compact JWS of ``payload`` under ``header`` (which gains ``"alg": "EdDSA"``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SecurityWarning)
        return jws.serialize_compact(
            {**header, "alg": ALGORITHM}, payload, key, algorithms=[ALGORITHM]
        )


def unverified_header(token: str, payload: bytes | None = None) -> dict[str, Any]:
    """The protected header of a compact JWS, before any check of its signature; ValueError
    when the token is not a compact JWS."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN:
        raise ValueError("not a compact JWS")
    try:
        return dict(jws.extract_compact(token.encode("ascii"), payload).headers())
    except (JoseError, ValueError, UnicodeError) as error:
        raise ValueError(f"not a compact JWS: {error}") from None


def verify(token: str, key: OKPKey, payload: bytes | None = None) -> tuple[dict[str, Any], bytes]:
    """``(header, payload)`` of a compact JWS whose EdDSA signature ``key`` verifies;
    ``payload`` for a detached one. ValueError for anything else (another algorithm, a bad
    signature, a malformed token)."""
    header = unverified_header(token, payload)
    if header.get("alg") != ALGORITHM:
        raise ValueError(f"the signature must use {ALGORITHM}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SecurityWarning)
            checked = jws.deserialize_compact(
                token.encode("ascii"), key, algorithms=[ALGORITHM], payload=payload
            )
    except (JoseError, ValueError) as error:
        raise ValueError(f"the signature does not verify: {error}") from None
    return header, checked.payload


def canonical_json(value: Any) -> bytes:
    """The JSON Canonicalization Scheme form (RFC 8785) of a value made of objects with ASCII
    member names, strings, booleans and lists (no numbers): sorted members, no whitespace,
    UTF-8, only the escapes JSON requires."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def b64url(data: bytes) -> str:
    """base64url without padding (RFC 7515 section 2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def token_hash(access_token: str) -> str:
    """The ``ath`` of a DPoP proof: base64url of the SHA-256 of the access token's ASCII."""
    return b64url(hashlib.sha256(access_token.encode("ascii")).digest())
