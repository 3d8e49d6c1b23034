"""DPoP proofs (RFC 9449) signed by the installation key.

Every request that needs possession of the key carries a new proof: ``typ`` dpop+jwt, the
public JWK in the header, and the claims ``jti`` (unique), ``htm`` (the method), ``htu`` (the
URL without query and fragment), ``iat`` (now, in seconds) and, with a credential, ``ath``
(the hash of the access token). A proof is never sent twice.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

from joserfc.jwk import OKPKey

from byoa_skills.byoag import jose
from byoa_skills.byoag.keys import public_jwk

PROOF_TYPE = "dpop+jwt"


def target_uri(url: str) -> str:
    """The ``htu`` of a request to ``url``: the URL without its query and fragment."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def make_proof(
    key: OKPKey,
    method: str,
    url: str,
    *,
    access_token: str | None = None,
    clock: Callable[[], float] = time.time,
) -> str:
    """A fresh DPoP proof for ``method url`` signed by ``key``, bound to ``access_token``
    (through ``ath``) when one is given."""
    claims: dict[str, str | int] = {
        "jti": secrets.token_urlsafe(18),
        "htm": method.upper(),
        "htu": target_uri(url),
        "iat": int(clock()),
    }
    if access_token is not None:
        claims["ath"] = jose.token_hash(access_token)
    header = {"typ": PROOF_TYPE, "jwk": public_jwk(key)}
    return jose.sign(header, json.dumps(claims).encode(), key)
