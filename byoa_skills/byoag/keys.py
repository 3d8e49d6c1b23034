"""The connector's Ed25519 keys: a new pair for the agent's identity at one platform and one
for this installation, made for each pairing and never used with another platform.

Private keys are kept as JWK files (RFC 7517) readable only by the user; a platform only ever
sees the public JWK and its thumbprint (RFC 7638).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from joserfc.errors import JoseError
from joserfc.jwk import OKPKey

from byoa_skills.store.files import write_private

CURVE = "Ed25519"


def new_key() -> OKPKey:
    """A fresh Ed25519 key pair."""
    return OKPKey.generate_key(CURVE, private=True)


def public_jwk(key: OKPKey) -> dict[str, str]:
    """The public JWK of ``key``: exactly ``kty``, ``crv`` and ``x``."""
    public = key.as_dict(private=False)
    return {"kty": "OKP", "crv": CURVE, "x": str(public["x"])}


def thumbprint(key: OKPKey) -> str:
    """The RFC 7638 SHA-256 thumbprint of ``key``'s public JWK, base64url."""
    return key.thumbprint()


def public_key_from_jwk(jwk: Any) -> OKPKey:
    """An Ed25519 public key from a JWK object; ValueError for any other key type or curve,
    or for a JWK that carries a private part."""
    if not isinstance(jwk, dict) or jwk.get("kty") != "OKP" or jwk.get("crv") != CURVE:
        raise ValueError("the key must be an Ed25519 public JWK")
    if "d" in jwk or not isinstance(jwk.get("x"), str):
        raise ValueError("the key must be a public JWK with its x member")
    try:
        return OKPKey.import_key({"kty": "OKP", "crv": CURVE, "x": jwk["x"]})
    except (JoseError, ValueError) as error:
        raise ValueError(f"the key cannot be read: {error}") from None


def save_key(path: Path, key: OKPKey) -> None:
    """Write ``key`` with its private part to ``path`` (mode 0600, atomically)."""
    write_private(path, json.dumps(key.as_dict(private=True)).encode())


def load_key(path: Path) -> OKPKey:
    """The private Ed25519 key kept in ``path``; ValueError when the file holds no such key."""
    try:
        data = json.loads(path.read_bytes())
        key = OKPKey.import_key(data)
    except (JoseError, ValueError, TypeError) as error:
        raise ValueError(f"{path} holds no key: {error}") from None
    if key.curve_name != CURVE or not key.is_private:
        raise ValueError(f"{path} holds no Ed25519 private key")
    return key


@dataclass(frozen=True)
class PairwiseKeys:
    """The two key pairs of one pairing: the agent's identity at this platform, and this
    installation (the key DPoP proofs are signed with and credentials are bound to)."""

    identity: OKPKey
    installation: OKPKey

    @classmethod
    def new(cls) -> PairwiseKeys:
        """Two fresh key pairs."""
        return cls(identity=new_key(), installation=new_key())
