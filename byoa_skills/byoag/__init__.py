"""BYOAg 0.1 pairing, the connector side: pair this wallet with a platform account.

The person starts pairing on the platform and gets a one-time code; they give the connector
the platform's exact host name and type the code at a protected prompt. The connector
discovers the platform's signed descriptor on that name, makes a new pair of Ed25519 keys
for this platform, redeems the code with a DPoP proof, and keeps the scoped, revocable
registration it gets back. See docs/byoag.md.
"""

from __future__ import annotations

from byoa_skills.byoag.connector import pair, platform_request, revoke
from byoa_skills.byoag.errors import BINDING_CODES, CODES, ByoagError
from byoa_skills.byoag.hostname import PlatformHost, check_platform_host
from byoa_skills.byoag.registrations import Registration, RegistrationStore

__all__ = [
    "BINDING_CODES",
    "CODES",
    "ByoagError",
    "PlatformHost",
    "Registration",
    "RegistrationStore",
    "check_platform_host",
    "pair",
    "platform_request",
    "revoke",
]
