"""A reference platform on loopback, a clock to move, and checks made with PyJWT (not the
connector's joserfc) for the BYOAg tests."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jwt
from jwt.algorithms import OKPAlgorithm

from byoa_skills.byoag import PlatformHost, RegistrationStore, check_platform_host
from byoa_skills.demos.platform import DEMO_ACCOUNT, DemoPlatform, start_platform


class Clock:
    """Wall-clock seconds that move only when told to."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@contextlib.asynccontextmanager
async def running_platform(**options: Any) -> AsyncIterator[DemoPlatform]:
    """The reference platform on ``localhost`` (both loopback addresses), a free port."""
    options.setdefault("poll_interval", 0)
    runner, platform = await start_platform(**options)
    try:
        yield platform
    finally:
        await runner.cleanup()


def host_of(platform: DemoPlatform) -> PlatformHost:
    """The name a person gives for ``platform``: ``localhost:PORT``, in development."""
    return check_platform_host(platform.issuer.split("://", 1)[1], dev_local=True)


def store_in(folder: Path) -> RegistrationStore:
    return RegistrationStore(folder / "byoag")


def new_code(platform: DemoPlatform, mode: str | None = None, account: str = DEMO_ACCOUNT) -> str:
    return platform.new_code(account, mode)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def rfc7638_thumbprint(jwk: dict[str, Any]) -> str:
    """The SHA-256 thumbprint of an OKP key, written out from RFC 7638 section 3."""
    required = {"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"]}
    text = json.dumps(required, sort_keys=True, separators=(",", ":"))
    return b64url(hashlib.sha256(text.encode()).digest())


def pyjwt_verify(token: str, jwk: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict]:
    """``(header, claims)`` of an EdDSA JWS verified by PyJWT with ``jwk``, or with the key
    in its own ``jwk`` header."""
    header = jwt.get_unverified_header(token)
    key = OKPAlgorithm.from_jwk(json.dumps(jwk or header["jwk"]))
    claims = jwt.decode(token, key, algorithms=["EdDSA"], options={"verify_aud": False})
    return header, claims


def pyjwt_proof(private_jwk: dict[str, Any], claims: dict[str, Any], typ: str = "dpop+jwt") -> str:
    """A proof made by PyJWT with a key of the test's own (a key other than the wallet's)."""
    key = OKPAlgorithm.from_jwk(json.dumps(private_jwk))
    public = {k: private_jwk[k] for k in ("kty", "crv", "x")}
    return jwt.encode(claims, key, algorithm="EdDSA", headers={"typ": typ, "jwk": public})
