"""The refusals of BYOAg pairing: the binding's codes, and one for an unusable platform.

Every refusal stops the pairing or the request (fail closed). A message says what went wrong
with this platform and this attempt only: never the code, a key, a credential, or anything
about other accounts.
"""

from __future__ import annotations

from byoa_skills.protocol.refusal import Refusal

DISCOVERY_NOT_FOUND = "discovery_not_found"
ISSUER_MISMATCH = "issuer_mismatch"
UNSUPPORTED_VERSION = "unsupported_version"
PAIRING_CODE_INVALID = "pairing_code_invalid"
PAIRING_CODE_EXPIRED = "pairing_code_expired"
PAIRING_CODE_REPLAYED = "pairing_code_replayed"
PAIRING_RATE_LIMITED = "pairing_rate_limited"
CONFIRMATION_REQUIRED = "confirmation_required"
PROOF_OF_POSSESSION_FAILED = "proof_of_possession_failed"

#: The binding's error codes, in its order.
BINDING_CODES = (
    DISCOVERY_NOT_FOUND,
    ISSUER_MISMATCH,
    UNSUPPORTED_VERSION,
    PAIRING_CODE_INVALID,
    PAIRING_CODE_EXPIRED,
    PAIRING_CODE_REPLAYED,
    PAIRING_RATE_LIMITED,
    CONFIRMATION_REQUIRED,
    PROOF_OF_POSSESSION_FAILED,
)
#: Not one of the binding's: the platform could not be reached after discovery, or answered
#: something the binding does not allow (a redirect, a broken answer, an unbound credential).
PLATFORM_ERROR = "platform_error"
CODES = (*BINDING_CODES, PLATFORM_ERROR)


class ByoagError(Refusal):
    """A refusal: ``code`` (one of :data:`CODES`), a one-line ``message``, and for the
    connector's own checks a kebab-case ``reason`` that says which check failed (e.g.
    ``redirect``, ``signature-invalid``), or None."""

    def __init__(self, code: str, message: str, *, reason: str | None = None) -> None:
        super().__init__(code, message)
        self.reason = reason
