"""Discovery: the platform's signed descriptor at its fixed well-known path.

``GET https://NAME/.well-known/byoag.json``, no redirect followed. The document must be
version 0.1.0, valid against the descriptor schema (docs/byoag.md), name the requested origin
as its issuer with its endpoints and JWKS on that same origin, and carry a detached EdDSA
signature (``signature``) over the canonical JSON of its other members that a key of the
platform's JWKS verifies. Anything else stops the pairing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from byoa_skills.byoag import jose
from byoa_skills.byoag.errors import (
    DISCOVERY_NOT_FOUND,
    ISSUER_MISMATCH,
    UNSUPPORTED_VERSION,
    ByoagError,
)
from byoa_skills.byoag.hostname import PlatformHost
from byoa_skills.byoag.keys import public_key_from_jwk
from byoa_skills.byoag.transport import PlatformClient

WELL_KNOWN_PATH = "/.well-known/byoag.json"
VERSION = "0.1.0"
#: The ``typ`` of the descriptor's signature header.
SIGNATURE_TYPE = "byoag-descriptor+jws"
CODE_MODE = "code"
CONFIRMATION_MODE = "platform-confirmation"
MODES = (CODE_MODE, CONFIRMATION_MODE)
#: Members that hold URLs on the platform's origin; the first three are required.
ENDPOINTS = ("jwks_uri", "pairing_endpoint", "status_endpoint", "revocation_endpoint")
REQUIRED = (
    "byoag",
    "issuer",
    "jwks_uri",
    "pairing_endpoint",
    "pairing_modes",
    "dpop_signing_alg_values_supported",
    "signature",
)


@dataclass(frozen=True)
class Descriptor:
    """A platform's checked and verified descriptor."""

    platform: PlatformHost
    issuer: str
    pairing_endpoint: str
    status_endpoint: str | None
    revocation_endpoint: str | None
    #: The pairing modes the platform supports, of those the connector knows.
    modes: tuple[str, ...]
    #: The skills the platform may ask for, when it says.
    scopes: tuple[str, ...] | None
    document: dict[str, Any]


async def discover(client: PlatformClient) -> Descriptor:
    """Fetch, check and verify the descriptor of the client's platform; a
    :class:`ByoagError` with the binding's code otherwise."""
    platform = client.platform
    answer = await client.get(platform.url(WELL_KNOWN_PATH))
    if answer.status != 200:
        raise ByoagError(
            DISCOVERY_NOT_FOUND,
            f"{platform.name} has no BYOAg descriptor (HTTP {answer.status})",
            reason="not-found",
        )
    if answer.content_type != "application/json" or not isinstance(answer.body, dict):
        raise _invalid(platform, "the descriptor is not a JSON object")
    descriptor = check_descriptor(answer.body, platform)
    jwks = await client.get(str(answer.body["jwks_uri"]))
    if jwks.status != 200 or not isinstance(jwks.body, dict):
        raise ByoagError(
            DISCOVERY_NOT_FOUND,
            f"{platform.name}'s JWKS cannot be read (HTTP {jwks.status})",
            reason="jwks-not-found",
        )
    verify_signature(answer.body, jwks.body, platform)
    return descriptor


def check_descriptor(document: Any, platform: PlatformHost) -> Descriptor:
    """The descriptor, when its version, schema and origins are right (its signature is
    checked by :func:`verify_signature`)."""
    if not isinstance(document, dict):
        raise _invalid(platform, "the descriptor is not a JSON object")
    version = document.get("byoag")
    if version is not None and version != VERSION:
        raise ByoagError(
            UNSUPPORTED_VERSION,
            f"{platform.name} speaks BYOAg {str(version)[:20]!r}; this connector speaks {VERSION}",
        )
    if "signature" not in document:
        raise ByoagError(
            DISCOVERY_NOT_FOUND, f"{platform.name}'s descriptor is not signed", reason="unsigned"
        )
    problem = _schema_problem(document)
    if problem:
        raise _invalid(platform, problem)
    if document["issuer"] != platform.origin:
        raise ByoagError(ISSUER_MISMATCH, f"the descriptor's issuer is not {platform.origin}")
    for member in ENDPOINTS:
        if member in document and not _on_origin(document[member], platform):
            raise ByoagError(
                ISSUER_MISMATCH, f"the descriptor's {member} is not a path on {platform.origin}"
            )
    modes = tuple(mode for mode in MODES if mode in document["pairing_modes"])
    if CONFIRMATION_MODE in modes and "status_endpoint" not in document:
        raise _invalid(platform, "platform confirmation needs a status_endpoint")
    scopes = document.get("scopes_supported")
    return Descriptor(
        platform=platform,
        issuer=document["issuer"],
        pairing_endpoint=document["pairing_endpoint"],
        status_endpoint=document.get("status_endpoint"),
        revocation_endpoint=document.get("revocation_endpoint"),
        modes=modes,
        scopes=tuple(scopes) if scopes is not None else None,
        document=document,
    )


def verify_signature(document: dict[str, Any], jwks: Any, platform: PlatformHost) -> None:
    """Check the descriptor's detached signature against the platform's JWKS: a compact JWS
    ``header..signature`` over :func:`signed_content`, header ``alg`` EdDSA, ``typ``
    byoag-descriptor+jws and the ``kid`` of an Ed25519 key of the set."""
    signature = document.get("signature")
    content = signed_content(document)
    try:
        header = jose.unverified_header(signature, content)
        if header.get("typ") != SIGNATURE_TYPE:
            raise ValueError(f"the signature's typ must be {SIGNATURE_TYPE}")
        key = public_key_from_jwk(_signing_key(jwks, header.get("kid")))
        jose.verify(signature, key, content)
    except ValueError as error:
        raise ByoagError(
            DISCOVERY_NOT_FOUND,
            f"{platform.name}'s descriptor signature is not valid: {error}",
            reason="signature-invalid",
        ) from None


def signed_content(document: dict[str, Any]) -> bytes:
    """What the descriptor's signature covers: the canonical JSON (RFC 8785) of every
    member but ``signature``."""
    return jose.canonical_json({k: v for k, v in document.items() if k != "signature"})


def _signing_key(jwks: Any, kid: Any) -> dict[str, Any]:
    keys = jwks.get("keys") if isinstance(jwks, dict) else None
    if not isinstance(kid, str) or not isinstance(keys, list):
        raise ValueError("the signature names no key of the platform's JWKS")
    for key in keys:
        if (
            isinstance(key, dict)
            and key.get("kid") == kid
            and key.get("use", "sig") == "sig"
            and key.get("alg", jose.ALGORITHM) == jose.ALGORITHM
        ):
            return key
    raise ValueError("the signature names no signing key of the platform's JWKS")


def _schema_problem(document: dict[str, Any]) -> str | None:
    """What breaks the descriptor schema, or None."""
    for member in REQUIRED:
        if member not in document:
            return f"the descriptor has no {member}"
    for member, value in document.items():
        if not isinstance(member, str) or not member.isascii():
            return "member names must be ASCII"
        if not (isinstance(value, (str, bool)) or _strings(value)):
            return f"{member} must be a string, a boolean or a list of strings"
    for member in ("byoag", "issuer", "signature", *ENDPOINTS):
        if member in document and not isinstance(document[member], str):
            return f"{member} must be a string"
    for member in ("pairing_modes", "dpop_signing_alg_values_supported", "scopes_supported"):
        if member in document and not _strings(document[member]):
            return f"{member} must be a list of strings"
    if not any(mode in MODES for mode in document["pairing_modes"]):
        return "pairing_modes names no mode this connector knows"
    if jose.ALGORITHM not in document["dpop_signing_alg_values_supported"]:
        return f"the platform does not take {jose.ALGORITHM} proofs"
    return None


def _strings(value: Any) -> bool:
    return (
        isinstance(value, list)
        and all(isinstance(item, str) for item in value)
        and len(set(value)) == len(value)
    )


def _on_origin(url: Any, platform: PlatformHost) -> bool:
    """Whether ``url`` is a path on exactly the platform's origin (no query or fragment)."""
    if not isinstance(url, str):
        return False
    parts = urlsplit(url)
    return (
        f"{parts.scheme}://{parts.netloc}" == platform.origin
        and parts.path.startswith("/")
        and not parts.query
        and not parts.fragment
        and "?" not in url
        and "#" not in url
    )


def _invalid(platform: PlatformHost, problem: str) -> ByoagError:
    return ByoagError(
        DISCOVERY_NOT_FOUND,
        f"{platform.name}'s descriptor is not valid: {problem}",
        reason="schema-invalid",
    )
