"""Pairing end to end on loopback, in both modes, and each way a code or a confirmation
fails."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from byoag_kit import Clock, host_of, new_code, running_platform, store_in

from byoa_skills.byoag import ByoagError, Registration, pair, platform_request, revoke
from byoa_skills.byoag import connector as connector_module
from byoa_skills.byoag.connector import Waiting
from byoa_skills.byoag.dpop import make_proof
from byoa_skills.byoag.registrations import RegistrationStore
from byoa_skills.demos.platform import CONFIRMATION_MODE, DEMO_ACCOUNT, DemoPlatform


async def whoami(
    platform: DemoPlatform, registration: Registration, store: RegistrationStore
) -> tuple[int, Any]:
    answer = await platform_request(
        registration, "GET", platform.url("/api/whoami"), store=store, dev_local=True
    )
    return answer.status, answer.body


def test_code_mode_pairs_and_a_protected_request_succeeds(tmp_path: Path) -> None:
    store = store_in(tmp_path)

    async def main() -> tuple[Registration, Any]:
        async with running_platform() as platform:
            registration = await pair(host_of(platform), new_code(platform), store=store)
            return registration, await whoami(platform, registration, store)

    registration, (status, body) = asyncio.run(main())
    assert registration.mode == "code"
    assert registration.scope == ("audio.transcribe", "text.generate")
    assert status == 200
    assert body == {
        "account": DEMO_ACCOUNT,
        "registration_id": registration.registration_id,
        "agent_id": registration.agent_id,
        "scope": list(registration.scope),
    }
    assert store.get(registration.platform) == registration


def test_platform_confirmation_pairs_after_the_account_holder_approves(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    polls: list[Any] = []
    proofs: list[str] = []

    async def main() -> tuple[Registration, Any, int]:
        async with running_platform(mode=CONFIRMATION_MODE) as platform:
            session = platform.sign_in(DEMO_ACCOUNT)
            status = platform.status

            def counted(proof: Any, body: Any) -> dict[str, Any]:
                polls.append(body)
                proofs.append(proof)
                return status(proof, body)

            platform.status = counted  # type: ignore[method-assign]
            redeemed = 0
            redeem = platform.redeem

            def redeem_counted(*args: Any) -> dict[str, Any]:
                nonlocal redeemed
                redeemed += 1
                return redeem(*args)

            platform.redeem = redeem_counted  # type: ignore[method-assign]

            async def approve(waiting: Waiting) -> None:
                while len(polls) < 2:  # let the connector poll a few times first
                    await asyncio.sleep(0.01)
                headers = {"Authorization": f"Bearer {session}"}
                async with aiohttp.ClientSession(headers=headers) as http:
                    listed = await (await http.get(platform.url("/account/pending"))).json()
                    assert [entry["pairing_id"] for entry in listed] == [waiting.pairing_id]
                    url = platform.url(f"/account/pending/{waiting.pairing_id}/approve")
                    assert (await http.post(url)).status == 200

            approvals: list[asyncio.Task[None]] = []
            registration = await pair(
                host_of(platform),
                new_code(platform),
                store=store,
                min_poll=0,
                on_waiting=lambda waiting: approvals.append(asyncio.create_task(approve(waiting))),
            )
            await approvals[0]
            return registration, await whoami(platform, registration, store), redeemed

    registration, (status, body), redeemed = asyncio.run(main())
    assert registration.mode == "platform-confirmation"
    assert status == 200 and body["registration_id"] == registration.registration_id
    assert redeemed == 1, "the code is sent once"
    assert len(polls) >= 3
    assert all(set(poll) == {"pairing_id"} for poll in polls), "a poll never carries the code"
    assert len(set(proofs)) == len(proofs), "a fresh proof for every poll"


def test_a_declined_confirmation_is_confirmation_required(tmp_path: Path) -> None:
    async def main() -> None:
        async with running_platform(mode=CONFIRMATION_MODE) as platform:

            def decline(waiting: Waiting) -> None:
                assert platform.decide(DEMO_ACCOUNT, waiting.pairing_id, approve=False)

            await pair(
                host_of(platform),
                new_code(platform),
                store=store_in(tmp_path),
                min_poll=0,
                on_waiting=decline,
            )

    with pytest.raises(ByoagError) as caught:
        asyncio.run(main())
    assert caught.value.code == "confirmation_required"
    assert store_in(tmp_path).list() == []


def test_a_confirmation_that_never_comes_is_confirmation_required(tmp_path: Path) -> None:
    clock = Clock()

    async def sleep(seconds: float) -> None:
        clock.advance(max(seconds, 20))
        await asyncio.sleep(0)

    async def main() -> None:
        async with running_platform(mode=CONFIRMATION_MODE, clock=clock) as platform:
            await pair(
                host_of(platform),
                new_code(platform),
                store=store_in(tmp_path),
                clock=clock,
                sleep=sleep,
                confirm_seconds=120,
            )

    with pytest.raises(ByoagError) as caught:
        asyncio.run(main())
    assert (caught.value.code, caught.value.reason) == ("confirmation_required", "timeout")


def attempt(tmp_path: Path, make_code: Any, **options: Any) -> ByoagError:
    """The refusal of pairing with the code ``make_code(platform, clock)`` gives."""
    clock = Clock()

    async def main() -> None:
        async with running_platform(clock=clock, **options) as platform:
            code = make_code(platform, clock)
            await pair(host_of(platform), code, store=store_in(tmp_path), clock=clock)

    with pytest.raises(ByoagError) as caught:
        asyncio.run(main())
    assert store_in(tmp_path).list() == []
    return caught.value


def test_a_wrong_code_is_pairing_code_invalid(tmp_path: Path) -> None:
    def wrong(platform: DemoPlatform, clock: Clock) -> str:
        new_code(platform)
        return "ABCDE-FGHJK"

    assert attempt(tmp_path, wrong).code == "pairing_code_invalid"


def test_an_expired_code_is_pairing_code_expired(tmp_path: Path) -> None:
    def expired(platform: DemoPlatform, clock: Clock) -> str:
        code = new_code(platform)
        clock.advance(301)
        return code

    assert attempt(tmp_path, expired).code == "pairing_code_expired"


def test_a_used_code_is_pairing_code_replayed(tmp_path: Path) -> None:
    def used(platform: DemoPlatform, clock: Clock) -> str:
        code = new_code(platform)
        platform.codes.redeem(code)
        return code

    assert attempt(tmp_path, used).code == "pairing_code_replayed"


def test_a_code_is_taken_however_it_is_typed(tmp_path: Path) -> None:
    async def main() -> Registration:
        async with running_platform() as platform:
            code = new_code(platform).lower().replace("-", " ")
            return await pair(host_of(platform), code, store=store_in(tmp_path))

    assert asyncio.run(main()).mode == "code"


def test_too_many_attempts_are_pairing_rate_limited(tmp_path: Path) -> None:
    clock = Clock()

    async def main() -> tuple[list[str], str]:
        async with running_platform(clock=clock, redeems_per_minute=3) as platform:
            good = new_code(platform)
            codes = []
            for wrong in ("AAAAA-AAAAA", "BBBBB-BBBBB", "CCCCC-CCCCC", good):
                try:
                    await pair(host_of(platform), wrong, store=store_in(tmp_path), clock=clock)
                except ByoagError as error:
                    codes.append(error.code)
            clock.advance(61)
            later = await pair(host_of(platform), good, store=store_in(tmp_path), clock=clock)
            return codes, later.mode

    codes, mode = asyncio.run(main())
    assert codes == ["pairing_code_invalid"] * 3 + ["pairing_rate_limited"]
    assert mode == "code", "the good code was not spent by the refused attempt"


def test_codes_per_account_are_rate_limited() -> None:
    from byoa_skills.demos.platform import PlatformRefusal

    platform = DemoPlatform("http://localhost:1", codes_per_minute=2)
    new_code(platform), new_code(platform)
    with pytest.raises(PlatformRefusal) as caught:
        new_code(platform)
    assert caught.value.code == "pairing_rate_limited"
    assert new_code(platform, account="someone-else")


def test_a_refusal_says_nothing_about_other_accounts(tmp_path: Path) -> None:
    async def refusal_body(platform: DemoPlatform) -> bytes:
        proof = make_proof(
            connector_module.PairwiseKeys.new().installation, "POST", platform.url("/byoag/pair")
        )
        async with aiohttp.ClientSession() as http:
            answer = await http.post(
                platform.url("/byoag/pair"),
                headers={"DPoP": proof},
                json={"code": "AAAAA-AAAAA", "agent": {}, "scope": []},
            )
            return await answer.read()

    async def main() -> tuple[bytes, bytes]:
        async with running_platform() as platform:
            alone = await refusal_body(platform)
            for account in ("alice", "bob"):
                new_code(platform, account=account)
            return alone, await refusal_body(platform)

    alone, with_others = asyncio.run(main())
    assert alone == with_others
    assert set(json.loads(alone)) == {"error", "error_description"}


def test_each_platform_gets_new_keys_kept_only_for_the_user(tmp_path: Path) -> None:
    store = store_in(tmp_path)

    async def main() -> list[Registration]:
        async with running_platform() as one, running_platform() as two:
            return [await pair(host_of(p), new_code(p), store=store) for p in (one, two, one)]

    first, second, again = asyncio.run(main())
    assert len({first.agent_id, second.agent_id, again.agent_id}) == 3
    assert len({first.jkt, second.jkt, again.jkt}) == 3
    assert [r.platform for r in store.list()] == sorted({first.platform, second.platform})
    for registration in store.list():
        folder = store.folder(registration.platform)
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        for name in ("identity.jwk", "installation.jwk", "registration.json"):
            assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
        keys = {
            json.loads((folder / n).read_text())["d"] for n in ("identity.jwk", "installation.jwk")
        }
        assert len(keys) == 2
    assert "access_token" not in first.shown()


def test_revoking_tells_the_platform_and_deletes_the_keys(tmp_path: Path) -> None:
    store = store_in(tmp_path)

    async def main() -> tuple[bool | None, int, bool | None]:
        async with running_platform() as platform:
            registration = await pair(host_of(platform), new_code(platform), store=store)
            key = store.installation_key(registration.platform)
            told = await revoke(registration.platform, store=store, dev_local=True)
            url = platform.url("/api/whoami")
            token = registration.access_token
            headers = {
                "Authorization": f"DPoP {token}",
                "DPoP": make_proof(key, "GET", url, access_token=token),
            }
            async with aiohttp.ClientSession() as http:
                status = (await http.get(url, headers=headers)).status
            return told, status, await revoke(registration.platform, store=store)

    told, status, again = asyncio.run(main())
    assert told is True
    assert status == 401, "the platform refuses the revoked credential, even with its key"
    assert again is None
    assert store.list() == []
    assert not any(p.suffix == ".jwk" for p in (tmp_path / "byoag").rglob("*"))


def test_a_credential_not_bound_to_the_key_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        async with running_platform() as platform:
            redeem = platform.redeem

            def unbound(*args: Any) -> dict[str, Any]:
                answer = redeem(*args)
                return {**answer, "cnf": {"jkt": "another-key-thumbprint"}}

            platform.redeem = unbound  # type: ignore[method-assign]
            await pair(host_of(platform), new_code(platform), store=store_in(tmp_path))

    with pytest.raises(ByoagError) as caught:
        asyncio.run(main())
    assert (caught.value.code, caught.value.reason) == (
        "proof_of_possession_failed",
        "credential-not-bound",
    )
    assert store_in(tmp_path).list() == []


@pytest.mark.parametrize("wrong", ["uri", "method"])
def test_a_pairing_proof_for_another_uri_or_method_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wrong: str
) -> None:
    def misbound(key: Any, method: str, url: str, **options: Any) -> str:
        if wrong == "uri":
            return make_proof(key, method, url.replace("/byoag/pair", "/byoag/other"), **options)
        return make_proof(key, "PUT", url, **options)

    monkeypatch.setattr(connector_module, "make_proof", misbound)

    async def main() -> None:
        async with running_platform() as platform:
            await pair(host_of(platform), new_code(platform), store=store_in(tmp_path))

    with pytest.raises(ByoagError) as caught:
        asyncio.run(main())
    assert caught.value.code == "proof_of_possession_failed"


def test_the_registration_has_the_scope_the_account_holder_allowed(tmp_path: Path) -> None:
    async def main() -> Registration:
        async with running_platform() as platform:
            code = platform.new_code(DEMO_ACCOUNT, scope=["audio.transcribe"])
            return await pair(host_of(platform), code, store=store_in(tmp_path))

    assert asyncio.run(main()).scope == ("audio.transcribe",)
