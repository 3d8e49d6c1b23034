"""The reference platform of BYOAg 0.1 pairing: what a connector pairs with.

It issues short-lived single-use pairing codes bound to an account, serves its signed
descriptor and JWKS, redeems codes against valid DPoP proofs in both pairing modes (with an
approve step for platform confirmation), limits attempts, and has one protected resource
that takes only a DPoP-bound credential with a fresh proof.
"""

from __future__ import annotations

from byoa_skills.demos.platform.app import build_app, start_platform
from byoa_skills.demos.platform.errors import PlatformRefusal
from byoa_skills.demos.platform.platform import (
    CODE_MODE,
    CONFIRMATION_MODE,
    DEMO_ACCOUNT,
    DemoPlatform,
)

__all__ = [
    "CODE_MODE",
    "CONFIRMATION_MODE",
    "DEMO_ACCOUNT",
    "DemoPlatform",
    "PlatformRefusal",
    "build_app",
    "start_platform",
]
