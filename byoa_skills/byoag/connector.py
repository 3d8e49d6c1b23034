"""The BYOAg connector: pair this wallet with a platform, then speak to it with proofs.

Pairing goes discover → new pairwise keys → redeem the code with a DPoP proof → (in platform
confirmation) poll the status with a fresh proof each time, never sending the code again →
check that the credential is bound to the installation key → keep the registration. Any
failure stops it with a :class:`ByoagError`; nothing is kept unless the pairing completes.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from byoa_skills import __version__
from byoa_skills.byoag import jose
from byoa_skills.byoag.discovery import CODE_MODE, CONFIRMATION_MODE, Descriptor, discover
from byoa_skills.byoag.dpop import make_proof
from byoa_skills.byoag.errors import (
    BINDING_CODES,
    CONFIRMATION_REQUIRED,
    DISCOVERY_NOT_FOUND,
    PLATFORM_ERROR,
    PROOF_OF_POSSESSION_FAILED,
    ByoagError,
)
from byoa_skills.byoag.hostname import PlatformHost, check_platform_host
from byoa_skills.byoag.keys import PairwiseKeys, public_jwk, thumbprint
from byoa_skills.byoag.registrations import Registration, RegistrationStore
from byoa_skills.byoag.transport import Answer, PlatformClient, platform_client
from byoa_skills.skills import KNOWN_SKILLS
from byoa_skills.store.clock import rfc3339

#: The ``typ`` of the agent statement, signed by the identity key.
STATEMENT_TYPE = "byoag-agent+jwt"
#: How long the connector waits for the platform's account holder to confirm, at most.
CONFIRM_SECONDS = 300.0
#: Polling the status more often than this is never done, whatever the platform says.
MIN_POLL_SECONDS = 1.0
MAX_POLL_SECONDS = 30.0
AGENT_NAME = f"byoa-skills {__version__}"

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[Any]]


@dataclass(frozen=True)
class Waiting:
    """Told when a pairing waits for the platform's account holder to confirm."""

    platform: str
    pairing_id: str


async def pair(
    platform: PlatformHost,
    code: str,
    *,
    scope: Sequence[str] = KNOWN_SKILLS,
    store: RegistrationStore | None = None,
    clock: Clock = time.time,
    sleep: Sleep = asyncio.sleep,
    min_poll: float = MIN_POLL_SECONDS,
    confirm_seconds: float = CONFIRM_SECONDS,
    on_waiting: Callable[[Waiting], None] | None = None,
) -> Registration:
    """Pair with ``platform`` using the one-time ``code``, asking for ``scope``; the
    registration, kept in ``store``. ``clock`` (seconds) and ``sleep`` are for tests."""
    store = store or RegistrationStore()
    async with platform_client(platform, DISCOVERY_NOT_FOUND) as client:
        descriptor = await discover(client)
        client.fails_with(PLATFORM_ERROR)
        keys = PairwiseKeys.new()
        body = {
            "code": code,
            "scope": list(scope),
            "agent": {
                "name": AGENT_NAME,
                "jwk": public_jwk(keys.identity),
                "statement": agent_statement(keys, descriptor.issuer, clock),
            },
        }
        proof = make_proof(keys.installation, "POST", descriptor.pairing_endpoint, clock=clock)
        answer = await client.post(descriptor.pairing_endpoint, body, {"DPoP": proof})
        mode = CODE_MODE
        if answer.status == 202:
            mode = CONFIRMATION_MODE
            polling = _Polling(clock, sleep, min_poll, confirm_seconds, on_waiting)
            answer = await _confirmation(client, descriptor, keys, answer, polling)
        granted = _registration_answer(answer, descriptor)
    registration = _checked_registration(granted, descriptor, keys, scope, mode, clock)
    store.save(registration, keys)
    return registration


def agent_statement(keys: PairwiseKeys, issuer: str, clock: Clock = time.time) -> str:
    """A compact JWS signed by the identity key (its public JWK in the header) that names the
    platform (``aud``) and binds the installation key (``cnf.jkt``): the platform learns that
    one agent identity stands behind this installation."""
    claims = {
        "aud": issuer,
        "iat": int(clock()),
        "jti": secrets.token_urlsafe(18),
        "cnf": {"jkt": thumbprint(keys.installation)},
    }
    header = {"typ": STATEMENT_TYPE, "jwk": public_jwk(keys.identity)}
    return jose.sign(header, json.dumps(claims).encode(), keys.identity)


async def platform_request(
    registration: Registration,
    method: str,
    url: str,
    *,
    body: Any = None,
    store: RegistrationStore | None = None,
    dev_local: bool = False,
    clock: Clock = time.time,
) -> Answer:
    """One request to a URL on the registered platform's origin, with the credential and a
    fresh proof bound to the URL, the method, the credential's hash, the time and a unique
    id. A refusal with one of the binding's codes is raised; other answers are returned."""
    store = store or RegistrationStore()
    platform = check_platform_host(registration.platform, dev_local=dev_local)
    try:
        key = store.installation_key(registration.platform)
    except ValueError as error:
        raise ByoagError(PROOF_OF_POSSESSION_FAILED, str(error), reason="key-missing") from None
    proof = make_proof(key, method, url, access_token=registration.access_token, clock=clock)
    headers = {"Authorization": f"DPoP {registration.access_token}", "DPoP": proof}
    async with platform_client(platform, PLATFORM_ERROR) as client:
        answer = await client.request(method, url, body=body, headers=headers)
    code = _error_code(answer)
    if code is not None:
        raise ByoagError(code, f"{platform.name} refused {method} {url}")
    return answer


async def revoke(
    platform_name: str,
    *,
    store: RegistrationStore | None = None,
    dev_local: bool = False,
    clock: Clock = time.time,
) -> bool | None:
    """Revoke the registration at ``platform_name``: tell the platform when it has a
    revocation endpoint, then forget the registration and delete its keys here, whatever the
    platform answered (without the key the credential is of no use). Whether the platform
    confirmed the revocation; None when there was no registration."""
    store = store or RegistrationStore()
    registration = store.get(platform_name)
    if registration is None:
        return False if store.remove(platform_name) else None
    told = False
    if registration.revocation_endpoint:
        try:
            answer = await platform_request(
                registration,
                "POST",
                registration.revocation_endpoint,
                store=store,
                dev_local=dev_local,
                clock=clock,
            )
            told = answer.status == 200
        except (ByoagError, ValueError):
            told = False
    store.remove(platform_name)
    return told


@dataclass(frozen=True)
class _Polling:
    clock: Clock
    sleep: Sleep
    min_interval: float
    most_seconds: float
    on_waiting: Callable[[Waiting], None] | None


async def _confirmation(
    client: PlatformClient,
    descriptor: Descriptor,
    keys: PairwiseKeys,
    pending: Answer,
    polling: _Polling,
) -> Answer:
    """Poll the status until the account holder confirms; the answer with the registration."""
    body = pending.body if isinstance(pending.body, dict) else {}
    pairing_id = body.get("pairing_id")
    status_endpoint = descriptor.status_endpoint
    if (
        CONFIRMATION_MODE not in descriptor.modes
        or status_endpoint is None
        or body.get("status") != "pending"
        or not isinstance(pairing_id, str)
    ):
        raise ByoagError(
            PLATFORM_ERROR, "the platform's pending answer breaks the binding", reason="bad-pending"
        )
    if polling.on_waiting is not None:
        polling.on_waiting(Waiting(descriptor.platform.name, pairing_id))
    clock = polling.clock
    deadline = clock() + polling.most_seconds
    while True:
        interval = body.get("interval")
        if not isinstance(interval, (int, float)) or isinstance(interval, bool):
            interval = 5
        await polling.sleep(min(max(float(interval), polling.min_interval), MAX_POLL_SECONDS))
        if clock() > deadline:
            raise ByoagError(
                CONFIRMATION_REQUIRED,
                f"{descriptor.platform.name}'s account holder did not confirm this agent in time",
                reason="timeout",
            )
        proof = make_proof(keys.installation, "POST", status_endpoint, clock=clock)
        answer = await client.post(status_endpoint, {"pairing_id": pairing_id}, {"DPoP": proof})
        body = answer.body if isinstance(answer.body, dict) else {}
        if answer.status != 200 or body.get("status") != "pending":
            return answer


def _registration_answer(answer: Answer, descriptor: Descriptor) -> dict[str, Any]:
    """The body of a successful redemption; the platform's refusal raised otherwise."""
    code = _error_code(answer)
    if code is not None:
        raise ByoagError(code, _refusal_message(code, descriptor.platform.name))
    body = answer.body if isinstance(answer.body, dict) else {}
    if answer.status not in (200, 201) or body.get("status") != "active":
        raise ByoagError(
            PLATFORM_ERROR,
            f"{descriptor.platform.name} answered HTTP {answer.status} without a registration",
            reason="bad-answer",
        )
    return body


def _checked_registration(
    body: dict[str, Any],
    descriptor: Descriptor,
    keys: PairwiseKeys,
    asked: Sequence[str],
    mode: str,
    clock: Clock,
) -> Registration:
    name = descriptor.platform.name
    cnf = body.get("cnf")
    if (
        str(body.get("token_type", "")).lower() != "dpop"
        or not isinstance(cnf, dict)
        or cnf.get("jkt") != thumbprint(keys.installation)
    ):
        raise ByoagError(
            PROOF_OF_POSSESSION_FAILED,
            f"{name}'s credential is not bound to this installation's key",
            reason="credential-not-bound",
        )
    scope, token = body.get("scope"), body.get("access_token")
    registration_id = body.get("registration_id")
    agent_id = body.get("agent_id", thumbprint(keys.identity))
    if (
        not isinstance(scope, list)
        or not scope
        or not set(scope) <= set(asked)
        or not all(isinstance(skill, str) for skill in scope)
        or not isinstance(token, str)
        or not token
        or not isinstance(registration_id, str)
        or agent_id != thumbprint(keys.identity)
    ):
        raise ByoagError(
            PLATFORM_ERROR,
            f"{name}'s registration breaks the binding (scope, credential, or agent)",
            reason="bad-registration",
        )
    return Registration(
        platform=name,
        issuer=descriptor.issuer,
        registration_id=registration_id,
        agent_id=agent_id,
        scope=tuple(scope),
        mode=mode,
        jkt=cnf["jkt"],
        paired_at=rfc3339(int(clock() * 1000)),
        revocation_endpoint=descriptor.revocation_endpoint,
        access_token=token,
    )


def _error_code(answer: Answer) -> str | None:
    """The binding's code in an error answer; ``platform_error`` for an error without one."""
    if answer.status < 400:
        return None
    code = answer.body.get("error") if isinstance(answer.body, dict) else None
    return code if code in BINDING_CODES else PLATFORM_ERROR


_MESSAGES = {
    "pairing_code_invalid": "the pairing code is not valid",
    "pairing_code_expired": "the pairing code has expired: ask the platform for a new one",
    "pairing_code_replayed": "the pairing code was already used: ask for a new one",
    "pairing_rate_limited": "too many attempts: wait a minute before trying again",
    "confirmation_required": "the account holder did not confirm this agent",
    "proof_of_possession_failed": "the platform did not accept the proof of possession",
}


def _refusal_message(code: str, platform: str) -> str:
    return f"{platform}: {_MESSAGES.get(code, 'the platform refused the pairing')}"
