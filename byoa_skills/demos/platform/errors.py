"""The platform's refusals: the binding's code and the HTTP status that carries it."""

from __future__ import annotations

PAIRING_CODE_INVALID = "pairing_code_invalid"
PAIRING_CODE_EXPIRED = "pairing_code_expired"
PAIRING_CODE_REPLAYED = "pairing_code_replayed"
PAIRING_RATE_LIMITED = "pairing_rate_limited"
CONFIRMATION_REQUIRED = "confirmation_required"
PROOF_OF_POSSESSION_FAILED = "proof_of_possession_failed"
#: Not the binding's: a request whose body is not what the endpoint takes.
INVALID_REQUEST = "invalid_request"

#: One sentence per code, the same for every account: nothing about other accounts shows.
DESCRIPTIONS = {
    PAIRING_CODE_INVALID: "The pairing code is not valid.",
    PAIRING_CODE_EXPIRED: "The pairing code has expired.",
    PAIRING_CODE_REPLAYED: "The pairing code was already used.",
    PAIRING_RATE_LIMITED: "Too many attempts; try again later.",
    CONFIRMATION_REQUIRED: "The account holder has not confirmed this agent.",
    PROOF_OF_POSSESSION_FAILED: "The proof of possession was not accepted.",
    INVALID_REQUEST: "The request is not one this endpoint takes.",
}


class PlatformRefusal(Exception):
    """A refusal the platform answers with ``{"error": code, "error_description": ...}``."""

    def __init__(self, code: str, status: int) -> None:
        super().__init__(code)
        self.code = code
        self.status = status

    def body(self) -> dict[str, str]:
        """The answer's JSON body."""
        return {"error": self.code, "error_description": DESCRIPTIONS[self.code]}
