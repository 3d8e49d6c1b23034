"""The platform's side of JOSE, through joserfc: its signing key and JWKS, the signed
descriptor, and reading the EdDSA JWS that connectors send.

joserfc warns that RFC 9864 deprecates the name ``EdDSA``; the binding and DPoP use it, and
every key here is checked to be Ed25519, so the warning is silenced in this module only.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from joserfc import jws
from joserfc.errors import JoseError, SecurityWarning
from joserfc.jwk import OKPKey

ALGORITHM = "EdDSA"
DESCRIPTOR_SIGNATURE_TYPE = "byoag-descriptor+jws"
MAX_TOKEN = 8192


def new_signing_key() -> OKPKey:
    """A fresh Ed25519 key, its ``kid`` its RFC 7638 thumbprint."""
    key = OKPKey.generate_key("Ed25519", private=True)
    key.ensure_kid()
    return key


def jwks(key: OKPKey) -> dict[str, Any]:
    """The JWKS that holds ``key``'s public half."""
    public = key.as_dict(private=False)
    return {"keys": [{**public, "kid": key.kid, "use": "sig", "alg": ALGORITHM}]}


def canonical_json(value: Any) -> bytes:
    """RFC 8785 form of a document of strings, booleans and lists of strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def signed_descriptor(members: dict[str, Any], key: OKPKey) -> dict[str, Any]:
    """``members`` with ``signature``: a compact JWS with detached payload over their
    canonical JSON, header ``alg`` EdDSA, ``kid`` and ``typ`` byoag-descriptor+jws."""
    header = {"alg": ALGORITHM, "kid": key.kid, "typ": DESCRIPTOR_SIGNATURE_TYPE}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SecurityWarning)
        token = jws.serialize_compact(header, canonical_json(members), key, [ALGORITHM])
    return {**members, "signature": jws.detach_content(token)}


def public_key(jwk: Any) -> OKPKey:
    """An Ed25519 public key from a JWK; ValueError for anything else."""
    if not isinstance(jwk, dict) or jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        raise ValueError("the key must be an Ed25519 public JWK")
    if "d" in jwk or not isinstance(jwk.get("x"), str):
        raise ValueError("the key must be a public JWK")
    try:
        return OKPKey.import_key({"kty": "OKP", "crv": "Ed25519", "x": jwk["x"]})
    except (JoseError, ValueError) as error:
        raise ValueError(f"unreadable key: {error}") from None


def read_self_signed(token: Any, typ: str) -> tuple[OKPKey, dict[str, Any]]:
    """``(key, claims)`` of a compact JWS of type ``typ`` signed with EdDSA by the Ed25519
    key in its own ``jwk`` header (a DPoP proof, an agent statement); ValueError otherwise."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN:
        raise ValueError("not a compact JWS")
    try:
        header = jws.extract_compact(token.encode("ascii")).headers()
    except (JoseError, ValueError, UnicodeError):
        raise ValueError("not a compact JWS") from None
    if header.get("typ") != typ or header.get("alg") != ALGORITHM:
        raise ValueError(f"the header must say typ {typ} and alg {ALGORITHM}")
    key = public_key(header.get("jwk"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SecurityWarning)
            checked = jws.deserialize_compact(token.encode("ascii"), key, [ALGORITHM])
        claims = json.loads(checked.payload)
    except (JoseError, ValueError):
        raise ValueError("the signature does not verify") from None
    if not isinstance(claims, dict):
        raise ValueError("the claims are not a JSON object")
    return key, claims
