"""Discovery: every way a descriptor can be wrong stops the pairing with its code."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
import pytest
from aiohttp import web
from byoag_kit import running_platform, store_in
from jwt.algorithms import OKPAlgorithm

from byoa_skills.byoag import ByoagError, check_platform_host, pair
from byoa_skills.byoag.discovery import Descriptor, discover
from byoa_skills.byoag.transport import platform_client
from byoa_skills.demos.platform import DemoPlatform
from byoa_skills.demos.platform.signing import canonical_json, new_signing_key, signed_descriptor

Responder = Callable[[int], web.StreamResponse]


def members(origin: str, **changes: Any) -> dict[str, Any]:
    """A valid descriptor's members (unsigned) for ``origin``, with ``changes``."""
    document = {
        "byoag": "0.1.0",
        "issuer": origin,
        "jwks_uri": f"{origin}/jwks",
        "pairing_endpoint": f"{origin}/pair",
        "status_endpoint": f"{origin}/status",
        "pairing_modes": ["code"],
        "dpop_signing_alg_values_supported": ["EdDSA"],
    }
    document.update(changes)
    return {k: v for k, v in document.items() if v is not None}


async def serve(routes: dict[str, Responder]) -> tuple[web.AppRunner, int]:
    """A server on 127.0.0.1 answering each path with ``routes[path](port)``."""
    port = 0

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path not in routes:
            return web.json_response({"error": "not found"}, status=404)
        return routes[request.path](port)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, port


def discover_with(routes: dict[str, Responder]) -> Descriptor:
    """Discovery against a server with ``routes``, named ``127.0.0.1:PORT``."""

    async def main() -> Descriptor:
        runner, port = await serve(routes)
        try:
            host = check_platform_host(f"127.0.0.1:{port}", dev_local=True)
            async with platform_client(host, "discovery_not_found") as client:
                return await discover(client)
        finally:
            await runner.cleanup()

    return asyncio.run(main())


def signed_routes(change: Callable[[str], dict[str, Any]], tamper: Any = None) -> dict:
    """A descriptor made by ``change(origin)``, signed, then ``tamper``ed, and its JWKS."""
    key = new_signing_key()

    def document(port: int) -> web.Response:
        origin = f"http://127.0.0.1:{port}"
        signed = signed_descriptor(change(origin), key)
        if tamper is not None:
            tamper(signed)
        return web.json_response(signed)

    public = {**key.as_dict(private=False), "kid": key.kid}
    return {
        "/.well-known/byoag.json": document,
        "/jwks": lambda port: web.json_response({"keys": [public]}),
    }


def refusal(routes: dict[str, Responder]) -> ByoagError:
    with pytest.raises(ByoagError) as caught:
        discover_with(routes)
    return caught.value


def test_a_signed_descriptor_on_the_origin_is_taken() -> None:
    descriptor = discover_with(signed_routes(members))
    assert descriptor.modes == ("code",)
    assert descriptor.pairing_endpoint.endswith("/pair")


def test_a_descriptor_signed_by_another_jose_library_is_taken() -> None:
    """PyJWT signs the canonical JSON detached; the connector (joserfc) verifies it."""
    private = json.loads(OKPAlgorithm.to_jwk(new_signing_key().private_key, as_dict=False))
    key = OKPAlgorithm.from_jwk(json.dumps(private))
    public = {k: private[k] for k in ("kty", "crv", "x")} | {"kid": "k1"}

    def document(port: int) -> web.Response:
        body = members(f"http://127.0.0.1:{port}")
        signature = jwt.api_jws.encode(
            canonical_json(body),
            key,
            algorithm="EdDSA",
            headers={"kid": "k1", "typ": "byoag-descriptor+jws"},
            is_payload_detached=True,
        )
        return web.json_response({**body, "signature": signature})

    routes = {
        "/.well-known/byoag.json": document,
        "/jwks": lambda port: web.json_response({"keys": [public]}),
    }
    assert discover_with(routes).issuer.startswith("http://127.0.0.1:")


def test_a_tampered_descriptor_is_refused() -> None:
    def tamper(signed: dict[str, Any]) -> None:
        signed["pairing_modes"] = ["code", "platform-confirmation"]

    error = refusal(signed_routes(members, tamper))
    assert (error.code, error.reason) == ("discovery_not_found", "signature-invalid")


def test_an_unsigned_descriptor_is_refused() -> None:
    error = refusal(signed_routes(members, lambda signed: signed.pop("signature")))
    assert (error.code, error.reason) == ("discovery_not_found", "unsigned")


@pytest.mark.parametrize("same_kid", [False, True])
def test_a_descriptor_signed_by_a_key_outside_the_jwks_is_refused(same_kid: bool) -> None:
    other = new_signing_key()

    def resign(signed: dict[str, Any]) -> None:
        unsigned = {k: v for k, v in signed.items() if k != "signature"}
        forged = signed_descriptor(unsigned, other)["signature"]
        if same_kid:  # the platform's header (its kid), another key's signature
            forged = signed["signature"].split(".")[0] + ".." + forged.split(".")[2]
        signed["signature"] = forged

    error = refusal(signed_routes(members, resign))
    assert (error.code, error.reason) == ("discovery_not_found", "signature-invalid")


def test_an_alg_none_signature_is_refused() -> None:
    def unsign(signed: dict[str, Any]) -> None:
        header = json.dumps({"alg": "none", "typ": "byoag-descriptor+jws"}).encode()
        signed["signature"] = base64.urlsafe_b64encode(header).rstrip(b"=").decode() + ".."

    error = refusal(signed_routes(members, unsign))
    assert (error.code, error.reason) == ("discovery_not_found", "signature-invalid")


@pytest.mark.parametrize(
    "change",
    [
        lambda origin: members(origin, issuer=origin.replace("127.0.0.1", "localhost")),
        lambda origin: members(origin, issuer=origin + "/"),
        lambda origin: members(origin, issuer="https://platform.example"),
        lambda origin: members(origin, jwks_uri="https://keys.example/jwks"),
        lambda origin: members(origin, pairing_endpoint="http://127.0.0.1:1/pair"),
        lambda origin: members(origin, status_endpoint="https://evil.example/status"),
        lambda origin: members(origin, pairing_endpoint=origin + "/pair?x=1"),
    ],
)
def test_an_issuer_or_endpoint_on_another_origin_is_refused(change: Any) -> None:
    assert refusal(signed_routes(change)).code == "issuer_mismatch"


@pytest.mark.parametrize("version", ["0.2.0", "1.0", "0.1"])
def test_another_version_is_refused(version: str) -> None:
    error = refusal(signed_routes(lambda origin: members(origin, byoag=version)))
    assert error.code == "unsupported_version"


@pytest.mark.parametrize(
    "change",
    [
        lambda origin: members(origin, pairing_modes="code"),
        lambda origin: members(origin, pairing_modes=["pigeon"]),
        lambda origin: members(origin, pairing_endpoint=None),
        lambda origin: members(origin, byoag=None),
        lambda origin: members(origin, dpop_signing_alg_values_supported=["ES256"]),
        lambda origin: members(origin, extra={"nested": True}),
        lambda origin: members(origin, extra=5),
        lambda origin: members(
            origin, pairing_modes=["platform-confirmation"], status_endpoint=None
        ),
    ],
)
def test_a_descriptor_that_breaks_the_schema_is_refused(change: Any) -> None:
    error = refusal(signed_routes(change))
    assert (error.code, error.reason) == ("discovery_not_found", "schema-invalid")


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_not_followed(status: int) -> None:
    routes = signed_routes(members)
    routes["/elsewhere"] = routes.pop("/.well-known/byoag.json")
    routes["/.well-known/byoag.json"] = lambda port: web.Response(
        status=status, headers={"Location": f"http://127.0.0.1:{port}/elsewhere"}
    )
    error = refusal(routes)
    assert (error.code, error.reason) == ("discovery_not_found", "redirect")


def test_no_descriptor_is_discovery_not_found() -> None:
    error = refusal({})
    assert (error.code, error.reason) == ("discovery_not_found", "not-found")


def test_a_descriptor_that_is_not_json_is_refused() -> None:
    error = refusal({"/.well-known/byoag.json": lambda port: web.Response(text="<html>")})
    assert error.code == "discovery_not_found"


@pytest.mark.parametrize(
    "address", ["10.1.2.3", "192.168.0.7", "127.0.0.1", "169.254.1.1", "::1", "fd00::5"]
)
def test_a_name_that_resolves_to_a_private_address_is_not_contacted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, address: str
) -> None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sockaddr = (address, 443, 0, 0) if family == socket.AF_INET6 else (address, 443)
    real = socket.getaddrinfo

    def resolve(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "platform.example":
            return [(family, socket.SOCK_STREAM, 6, "", sockaddr)]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    store = store_in(tmp_path)
    with pytest.raises(ByoagError) as caught:
        asyncio.run(pair(check_platform_host("platform.example"), "ABCDE-FGHJK", store=store))
    assert (caught.value.code, caught.value.reason) == ("discovery_not_found", "private-address")
    assert store.list() == []


def test_a_failed_discovery_keeps_nothing_and_sends_no_code(tmp_path: Path) -> None:
    async def main() -> tuple[ByoagError, DemoPlatform, list[Any]]:
        async with running_platform() as platform:
            redeemed: list[Any] = []
            platform.redeem = lambda *args: redeemed.append(args)  # type: ignore[method-assign]
            port = platform.issuer.rsplit(":", 1)[1]
            host = check_platform_host(f"127.0.0.1:{port}", dev_local=True)  # issuer: localhost
            with pytest.raises(ByoagError) as caught:
                await pair(host, "ABCDE-FGHJK", store=store_in(tmp_path))
            return caught.value, platform, redeemed

    error, _, redeemed = asyncio.run(main())
    assert error.code == "issuer_mismatch"
    assert redeemed == []
    assert store_in(tmp_path).list() == []
