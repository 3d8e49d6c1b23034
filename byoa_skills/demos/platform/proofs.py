"""Checking DPoP proofs (RFC 9449) and the agent's statement, as the platform does.

A proof counts once: its ``jti`` is remembered until its ``iat`` is out of the freshness
window, so a proof sent twice is refused. ``htu`` must be exactly the endpoint's URL on the
platform's issuer, ``htm`` the request's method, ``iat`` within 60 seconds of the platform's
clock, and, with a credential, ``ath`` the credential's hash.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Callable
from typing import Any

from byoa_skills.demos.platform.errors import PROOF_OF_POSSESSION_FAILED, PlatformRefusal
from byoa_skills.demos.platform.signing import read_self_signed

PROOF_TYPE = "dpop+jwt"
STATEMENT_TYPE = "byoag-agent+jwt"
#: How far a proof's ``iat`` may be from the platform's clock, either way.
FRESH_SECONDS = 60


def token_hash(access_token: str) -> str:
    """base64url of the SHA-256 of the access token: a proof's ``ath``."""
    digest = hashlib.sha256(access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class ProofChecker:
    """Checks proofs against one clock and one memory of the ``jti`` already seen."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._seen: dict[str, float] = {}

    def check(self, proof: Any, method: str, url: str, access_token: str | None = None) -> str:
        """The thumbprint (RFC 7638) of the key that signed a valid, fresh, first-seen proof
        for ``method url`` (bound to ``access_token`` when given); a refusal otherwise."""
        try:
            key, claims = read_self_signed(proof, PROOF_TYPE)
        except ValueError:
            raise _refused() from None
        now = self._clock()
        iat, jti = claims.get("iat"), claims.get("jti")
        fresh = (
            isinstance(iat, int) and not isinstance(iat, bool) and abs(now - iat) <= FRESH_SECONDS
        )
        bound = claims.get("htm") == method and claims.get("htu") == url
        if access_token is None:
            bound = bound and "ath" not in claims
        else:
            bound = bound and claims.get("ath") == token_hash(access_token)
        if not (fresh and bound and isinstance(jti, str) and 8 <= len(jti) <= 128):
            raise _refused()
        self._forget_old(now)
        if jti in self._seen:
            raise _refused()
        self._seen[jti] = iat + FRESH_SECONDS
        return key.thumbprint()

    def statement(self, statement: Any, jwk: Any, issuer: str, jkt: str) -> str:
        """The agent identity's thumbprint, when ``statement`` is signed by the key ``jwk``
        and names this ``issuer`` and the installation key ``jkt``; a refusal otherwise."""
        try:
            key, claims = read_self_signed(statement, STATEMENT_TYPE)
        except ValueError:
            raise _refused() from None
        cnf, iat = claims.get("cnf"), claims.get("iat")
        if (
            not isinstance(jwk, dict)
            or key.as_dict(private=False).get("x") != jwk.get("x")
            or claims.get("aud") != issuer
            or not isinstance(cnf, dict)
            or cnf.get("jkt") != jkt
            or not isinstance(iat, int)
            or abs(self._clock() - iat) > FRESH_SECONDS
        ):
            raise _refused()
        return key.thumbprint()

    def _forget_old(self, now: float) -> None:
        for jti in [jti for jti, until in self._seen.items() if until < now - FRESH_SECONDS]:
            del self._seen[jti]


def _refused() -> PlatformRefusal:
    return PlatformRefusal(PROOF_OF_POSSESSION_FAILED, 401)
