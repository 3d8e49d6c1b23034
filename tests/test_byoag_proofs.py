"""Proof of possession after pairing: the protected resource takes only the credential with a
fresh proof by its key; and what the connector signs verifies with PyJWT, not joserfc."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from byoag_kit import (
    b64url,
    host_of,
    new_code,
    pyjwt_proof,
    pyjwt_verify,
    rfc7638_thumbprint,
    running_platform,
    store_in,
)
from joserfc.jwk import OKPKey

from byoa_skills.byoag import ByoagError, Registration, pair, platform_request
from byoa_skills.byoag import connector as connector_module
from byoa_skills.byoag.dpop import make_proof
from byoa_skills.byoag.keys import new_key, public_jwk, save_key
from byoa_skills.demos.platform import DemoPlatform

#: ``attack(context) -> (headers, method, path)`` of one request to the protected resource.
Attack = Callable[[dict[str, Any]], tuple[dict[str, str], str, str]]


def wallet_proof(
    context: dict[str, Any], method: str = "GET", path: str = "/api/whoami", **options: Any
) -> str:
    options.setdefault("access_token", context["token"])
    return make_proof(context["key"], method, context["platform"].url(path), **options)


def dpop(context: dict[str, Any], proof: str) -> dict[str, str]:
    return {"Authorization": f"DPoP {context['token']}", "DPoP": proof}


def attacker_claims(context: dict[str, Any], **changes: Any) -> dict[str, Any]:
    claims = {
        "jti": b64url(hashlib.sha256(str(time.time_ns()).encode()).digest())[:22],
        "htm": "GET",
        "htu": context["platform"].url("/api/whoami"),
        "iat": int(time.time()),
        "ath": b64url(hashlib.sha256(context["token"].encode()).digest()),
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def requests_after_pairing(tmp_path: Path, attacks: list[Attack]) -> list[tuple[int, Any, str]]:
    """Pair, then make each attack's request; ``(status, body, WWW-Authenticate)`` of each."""
    store = store_in(tmp_path)

    async def main() -> list[tuple[int, Any, str]]:
        async with running_platform() as platform:
            registration = await pair(host_of(platform), new_code(platform), store=store)
            context = {
                "platform": platform,
                "token": registration.access_token,
                "key": store.installation_key(registration.platform),
            }
            answers = []
            async with aiohttp.ClientSession() as http:
                for attack in attacks:
                    headers, method, path = attack(context)
                    async with http.request(method, platform.url(path), headers=headers) as reply:
                        answers.append(
                            (
                                reply.status,
                                await reply.json(),
                                reply.headers.get("WWW-Authenticate", ""),
                            )
                        )
            return answers

    return asyncio.run(main())


def refused(answer: tuple[int, Any, str]) -> bool:
    status, body, challenge = answer
    return (
        status == 401
        and body["error"] == "proof_of_possession_failed"
        and challenge.startswith("DPoP")
    )


def test_the_wallet_key_with_a_fresh_proof_is_served(tmp_path: Path) -> None:
    [answer] = requests_after_pairing(
        tmp_path,
        [
            lambda c: (dpop(c, wallet_proof(c)), "GET", "/api/whoami"),
        ],
    )
    assert answer[0] == 200


def test_a_proof_signed_by_another_key_is_refused(tmp_path: Path) -> None:
    other = json.loads(json.dumps(new_key().as_dict(private=True)))

    def own_header(context: dict[str, Any]) -> tuple[dict[str, str], str, str]:
        return dpop(context, pyjwt_proof(other, attacker_claims(context))), "GET", "/api/whoami"

    def wallet_header(context: dict[str, Any]) -> tuple[dict[str, str], str, str]:
        # The wallet's public key in the header, another key's signature.
        proof = pyjwt_proof(other, attacker_claims(context))
        forged_header = json.dumps(
            {"typ": "dpop+jwt", "alg": "EdDSA", "jwk": public_jwk(context["key"])}
        ).encode()
        parts = proof.split(".")
        return dpop(context, ".".join([b64url(forged_header), *parts[1:]])), "GET", "/api/whoami"

    answers = requests_after_pairing(tmp_path, [own_header, wallet_header])
    assert all(refused(answer) for answer in answers)


def test_a_proof_for_another_uri_or_method_is_refused(tmp_path: Path) -> None:
    answers = requests_after_pairing(
        tmp_path,
        [
            lambda c: (dpop(c, wallet_proof(c, path="/api/other")), "GET", "/api/whoami"),
            lambda c: (dpop(c, wallet_proof(c, method="POST")), "GET", "/api/whoami"),
            lambda c: (
                dpop(c, wallet_proof(c, path="/byoag/revoke", method="POST")),
                "GET",
                "/api/whoami",
            ),
        ],
    )
    assert all(refused(answer) for answer in answers)


def test_a_replayed_proof_id_is_refused(tmp_path: Path) -> None:
    kept: dict[str, str] = {}

    def first(context: dict[str, Any]) -> tuple[dict[str, str], str, str]:
        kept["proof"] = wallet_proof(context)
        return dpop(context, kept["proof"]), "GET", "/api/whoami"

    def again(context: dict[str, Any]) -> tuple[dict[str, str], str, str]:
        return dpop(context, kept["proof"]), "GET", "/api/whoami"

    def same_jti(context: dict[str, Any]) -> tuple[dict[str, str], str, str]:
        # A new proof by the wallet's key that reuses the first one's jti.
        jti = pyjwt_verify(kept["proof"])[1]["jti"]
        private = context["key"].as_dict(private=True)
        return (
            dpop(context, pyjwt_proof(private, attacker_claims(context, jti=jti))),
            "GET",
            ("/api/whoami"),
        )

    answers = requests_after_pairing(tmp_path, [first, again, same_jti])
    assert answers[0][0] == 200
    assert refused(answers[1]) and refused(answers[2])


def test_a_stale_proof_or_one_without_the_token_hash_is_refused(tmp_path: Path) -> None:
    answers = requests_after_pairing(
        tmp_path,
        [
            lambda c: (
                dpop(c, wallet_proof(c, clock=lambda: time.time() - 600)),
                "GET",
                "/api/whoami",
            ),
            lambda c: (
                dpop(c, wallet_proof(c, clock=lambda: time.time() + 600)),
                "GET",
                "/api/whoami",
            ),
            lambda c: (dpop(c, wallet_proof(c, access_token=None)), "GET", "/api/whoami"),
            lambda c: (
                dpop(c, wallet_proof(c, access_token="another-token")),
                "GET",
                "/api/whoami",
            ),
        ],
    )
    assert all(refused(answer) for answer in answers)


def test_a_stolen_credential_without_the_key_is_refused(tmp_path: Path) -> None:
    thief = json.loads(json.dumps(new_key().as_dict(private=True)))
    answers = requests_after_pairing(
        tmp_path,
        [
            lambda c: ({"Authorization": f"Bearer {c['token']}"}, "GET", "/api/whoami"),
            lambda c: ({"Authorization": f"DPoP {c['token']}"}, "GET", "/api/whoami"),
            lambda c: (dpop(c, pyjwt_proof(thief, attacker_claims(c))), "GET", "/api/whoami"),
            lambda c: (
                {"Authorization": "DPoP made-up", "DPoP": wallet_proof(c)},
                "GET",
                "/api/whoami",
            ),
            lambda c: ({}, "GET", "/api/whoami"),
        ],
    )
    assert all(refused(answer) for answer in answers)


def test_the_connector_reports_a_refused_proof_with_its_code(tmp_path: Path) -> None:
    store = store_in(tmp_path)

    async def main() -> None:
        async with running_platform() as platform:
            registration = await pair(host_of(platform), new_code(platform), store=store)
            save_key(store.folder(registration.platform) / "installation.jwk", new_key())
            await platform_request(
                registration, "GET", platform.url("/api/whoami"), store=store, dev_local=True
            )

    with pytest.raises(ByoagError) as caught:
        asyncio.run(main())
    assert caught.value.code == "proof_of_possession_failed"


def test_what_the_connector_signs_verifies_with_pyjwt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proofs: list[str] = []
    bodies: list[Any] = []

    def kept(*args: Any, **options: Any) -> str:
        proofs.append(make_proof(*args, **options))
        return proofs[-1]

    monkeypatch.setattr(connector_module, "make_proof", kept)
    store = store_in(tmp_path)

    async def main() -> tuple[DemoPlatform, Registration]:
        async with running_platform() as platform:
            redeem = platform.redeem

            def seen(proof: Any, body: Any, client: str) -> dict[str, Any]:
                bodies.append(body)
                return redeem(proof, body, client)

            platform.redeem = seen  # type: ignore[method-assign]
            registration = await pair(host_of(platform), new_code(platform), store=store)
            await platform_request(
                registration, "GET", platform.url("/api/whoami?x=1"), store=store, dev_local=True
            )
            return platform, registration

    platform, registration = asyncio.run(main())
    redemption, request = proofs
    header, claims = pyjwt_verify(redemption)
    assert header["typ"] == "dpop+jwt" and header["alg"] == "EdDSA"
    assert set(header["jwk"]) == {"kty", "crv", "x"}
    assert rfc7638_thumbprint(header["jwk"]) == registration.jkt
    assert claims["htm"] == "POST" and claims["htu"] == platform.url("/byoag/pair")
    assert "ath" not in claims and abs(claims["iat"] - time.time()) < 60
    header, claims = pyjwt_verify(request)
    assert rfc7638_thumbprint(header["jwk"]) == registration.jkt
    assert claims["htm"] == "GET" and claims["htu"] == platform.url("/api/whoami")
    token_hash = b64url(hashlib.sha256(registration.access_token.encode()).digest())
    assert claims["ath"] == token_hash
    assert pyjwt_verify(redemption)[1]["jti"] != claims["jti"]

    agent = bodies[0]["agent"]
    header, statement = pyjwt_verify(agent["statement"], agent["jwk"])
    assert header["typ"] == "byoag-agent+jwt"
    assert statement["aud"] == platform.issuer
    assert statement["cnf"] == {"jkt": registration.jkt}
    assert rfc7638_thumbprint(agent["jwk"]) == registration.agent_id
    assert "d" not in agent["jwk"]


def test_joserfc_thumbprints_are_rfc_7638() -> None:
    key = new_key()
    jwk = public_jwk(key)
    assert rfc7638_thumbprint(jwk) == OKPKey.import_key(jwk).thumbprint() == key.thumbprint()
