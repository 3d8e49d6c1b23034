"""The reference platform's state and rules, without HTTP: accounts, codes, pending
confirmations, registrations and their DPoP-bound credentials.

Every "no" is a :class:`PlatformRefusal` with the binding's code, worded the same for every
account, so an answer never tells whether another account, code or registration exists.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from byoa_skills.demos.platform.codes import CodeBook
from byoa_skills.demos.platform.errors import (
    CONFIRMATION_REQUIRED,
    INVALID_REQUEST,
    PAIRING_RATE_LIMITED,
    PROOF_OF_POSSESSION_FAILED,
    PlatformRefusal,
)
from byoa_skills.demos.platform.proofs import ProofChecker
from byoa_skills.demos.platform.signing import jwks, new_signing_key, signed_descriptor
from byoa_skills.demos.rate import RateLimiter

VERSION = "0.1.0"
CODE_MODE = "code"
CONFIRMATION_MODE = "platform-confirmation"
SCOPES = ("audio.transcribe", "text.generate")
WELL_KNOWN = "/.well-known/byoag.json"
JWKS_PATH = "/.well-known/byoag-jwks.json"
PAIR_PATH = "/byoag/pair"
STATUS_PATH = "/byoag/pair/status"
REVOKE_PATH = "/byoag/revoke"
WHOAMI_PATH = "/api/whoami"
#: Redemption attempts per client address, and codes per account, in any 60 seconds.
REDEEMS_PER_MINUTE = 10
CODES_PER_MINUTE = 5
#: How long a redeemed code waits for the account holder's confirmation.
CONFIRM_S = 300.0
DEMO_ACCOUNT = "demo"

Clock = Callable[[], float]


@dataclass
class Pending:
    """A redeemed code waiting for its account holder's confirmation."""

    account: str
    agent_id: str
    agent_name: str
    jkt: str
    scope: tuple[str, ...]
    expires: float
    state: str = "pending"  # or "approved", "declined"


@dataclass
class Registration:
    """An agent registered to an account; its credential is bound to ``jkt``."""

    id: str
    account: str
    agent_id: str
    agent_name: str
    scope: tuple[str, ...]
    jkt: str
    mode: str


@dataclass
class DemoPlatform:
    """One platform at ``issuer`` (its origin, e.g. ``http://localhost:8443``)."""

    issuer: str
    mode: str = CODE_MODE
    clock: Clock = time.time
    poll_interval: float = 2.0
    redeems_per_minute: int = REDEEMS_PER_MINUTE
    codes_per_minute: int = CODES_PER_MINUTE
    #: Told of each new pending confirmation (the demo prints how to approve it).
    on_pending: Callable[[str, Pending], None] | None = None
    key: Any = field(default_factory=new_signing_key)

    def __post_init__(self) -> None:
        self.codes = CodeBook(self.issuer, self.clock)
        self.proofs = ProofChecker(self.clock)
        self._redeems = RateLimiter(self.redeems_per_minute, self.clock)
        self._issues = RateLimiter(self.codes_per_minute, self.clock)
        #: account session token -> account name
        self._sessions: dict[str, str] = {}
        self.pending: dict[str, Pending] = {}
        #: SHA-256 of the credential -> registration
        self._registrations: dict[str, Registration] = {}

    # -- what any client may read --------------------------------------------------------

    def descriptor(self) -> dict[str, Any]:
        """The signed descriptor served at ``/.well-known/byoag.json``."""
        return signed_descriptor(
            {
                "byoag": VERSION,
                "issuer": self.issuer,
                "jwks_uri": self.url(JWKS_PATH),
                "pairing_endpoint": self.url(PAIR_PATH),
                "status_endpoint": self.url(STATUS_PATH),
                "revocation_endpoint": self.url(REVOKE_PATH),
                "pairing_modes": [CODE_MODE, CONFIRMATION_MODE],
                "scopes_supported": list(SCOPES),
                "dpop_signing_alg_values_supported": ["EdDSA"],
            },
            self.key,
        )

    def jwks(self) -> dict[str, Any]:
        """The platform's public keys."""
        return jwks(self.key)

    def url(self, path: str) -> str:
        """``path`` on the issuer."""
        return self.issuer + path

    # -- the account holder (first-party) ------------------------------------------------

    def sign_in(self, account: str) -> str:
        """A session token for ``account`` (the demo's login)."""
        session = secrets.token_urlsafe(24)
        self._sessions[session] = account
        return session

    def account_of(self, session: Any) -> str | None:
        """The account a session token belongs to, or None."""
        return self._sessions.get(session) if isinstance(session, str) else None

    def new_code(self, account: str, mode: str | None = None, scope: Sequence[str] = SCOPES) -> str:
        """A one-time code for ``account``; ``pairing_rate_limited`` over the per-account
        limit."""
        mode = mode or self.mode
        if mode not in (CODE_MODE, CONFIRMATION_MODE) or not set(scope) <= set(SCOPES):
            raise PlatformRefusal(INVALID_REQUEST, 400)
        if not self._issues.allow(account):
            raise PlatformRefusal(PAIRING_RATE_LIMITED, 429)
        return self.codes.issue(account, mode, scope)

    def pending_of(self, account: str) -> dict[str, Pending]:
        """The confirmations ``account`` has to decide, by pairing id."""
        now = self.clock()
        return {
            pairing_id: entry
            for pairing_id, entry in self.pending.items()
            if entry.account == account and entry.state == "pending" and entry.expires > now
        }

    def decide(self, account: str, pairing_id: str, approve: bool) -> bool:
        """Approve or decline one of ``account``'s pending confirmations; False when it has
        none with this id."""
        entry = self.pending_of(account).get(pairing_id)
        if entry is None:
            return False
        entry.state = "approved" if approve else "declined"
        return True

    # -- the connector -------------------------------------------------------------------

    def redeem(self, proof: Any, body: Any, client: str) -> dict[str, Any]:
        """Redeem a code: the registration (``status`` active) in code mode, or ``status``
        pending with a ``pairing_id`` in platform confirmation; a refusal otherwise."""
        if not self._redeems.allow(client):
            raise PlatformRefusal(PAIRING_RATE_LIMITED, 429)
        jkt = self.proofs.check(proof, "POST", self.url(PAIR_PATH))
        agent = body.get("agent") if isinstance(body, dict) else None
        scope = body.get("scope") if isinstance(body, dict) else None
        if not isinstance(agent, dict) or not isinstance(scope, list):
            raise PlatformRefusal(INVALID_REQUEST, 400)
        agent_id = self.proofs.statement(agent.get("statement"), agent.get("jwk"), self.issuer, jkt)
        code = self.codes.redeem(body.get("code"))
        granted = tuple(skill for skill in code.scope if skill in scope)
        if not granted:
            raise PlatformRefusal(INVALID_REQUEST, 400)
        name = str(agent.get("name", ""))[:100]
        if code.mode == CODE_MODE:
            return self._register(code.account, agent_id, name, granted, jkt, CODE_MODE)
        pairing_id = secrets.token_urlsafe(18)
        entry = Pending(code.account, agent_id, name, jkt, granted, self.clock() + CONFIRM_S)
        self.pending[pairing_id] = entry
        if self.on_pending is not None:
            self.on_pending(pairing_id, entry)
        return {
            "status": "pending",
            "pairing_id": pairing_id,
            "interval": self.poll_interval,
            "expires_in": int(CONFIRM_S),
        }

    def status(self, proof: Any, body: Any) -> dict[str, Any]:
        """A pending confirmation's state, for the key that redeemed the code: ``pending``,
        or the registration once approved (given once); ``confirmation_required`` when it
        was declined, expired, or is not known."""
        jkt = self.proofs.check(proof, "POST", self.url(STATUS_PATH))
        pairing_id = body.get("pairing_id") if isinstance(body, dict) else None
        entry = self.pending.get(pairing_id) if isinstance(pairing_id, str) else None
        if entry is None:
            raise PlatformRefusal(CONFIRMATION_REQUIRED, 403)
        if entry.jkt != jkt:
            raise PlatformRefusal(PROOF_OF_POSSESSION_FAILED, 401)
        if entry.state == "declined" or (
            entry.state == "pending" and entry.expires <= self.clock()
        ):
            del self.pending[pairing_id]
            raise PlatformRefusal(CONFIRMATION_REQUIRED, 403)
        if entry.state == "pending":
            return {"status": "pending", "interval": self.poll_interval}
        del self.pending[pairing_id]
        return self._register(
            entry.account,
            entry.agent_id,
            entry.agent_name,
            entry.scope,
            entry.jkt,
            CONFIRMATION_MODE,
        )

    def authenticate(self, authorization: Any, proof: Any, method: str, path: str) -> Registration:
        """The registration whose credential is in ``Authorization: DPoP <token>``, when a
        fresh proof for ``method path`` signed by the key it is bound to comes with it."""
        scheme, _, token = str(authorization or "").partition(" ")
        registration = self._registrations.get(_digest(token)) if token else None
        if scheme != "DPoP" or registration is None:
            raise PlatformRefusal(PROOF_OF_POSSESSION_FAILED, 401)
        jkt = self.proofs.check(proof, method, self.url(path), access_token=token)
        if jkt != registration.jkt:
            raise PlatformRefusal(PROOF_OF_POSSESSION_FAILED, 401)
        return registration

    def revoke(self, registration: Registration) -> None:
        """End ``registration``: its credential is refused from now on."""
        for digest in [d for d, r in self._registrations.items() if r.id == registration.id]:
            del self._registrations[digest]

    def _register(
        self, account: str, agent_id: str, name: str, scope: tuple[str, ...], jkt: str, mode: str
    ) -> dict[str, Any]:
        token = secrets.token_urlsafe(32)
        registration = Registration(
            secrets.token_urlsafe(12), account, agent_id, name, scope, jkt, mode
        )
        self._registrations[_digest(token)] = registration
        return {
            "status": "active",
            "registration_id": registration.id,
            "agent_id": agent_id,
            "scope": list(scope),
            "token_type": "DPoP",
            "access_token": token,
            "cnf": {"jkt": jkt},
        }


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
