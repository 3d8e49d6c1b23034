"""One party, one place on the visitor's desk: page requests from many subdomains of one
registrable domain hold one place, and another party's request is still shown (a real
``serve``, real HTTP)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from engine import TOKEN, Engine
from grants import GEO_MANIFEST
from sitekit import until

from byoa_skills.consent.party import party_of

HEADERS = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize(
    ("origin", "party"),
    [
        ("https://s1.example.org", "example.org"),
        ("https://example.org", "example.org"),
        ("http://a.b.example.co.uk:8080", "example.co.uk"),
        ("https://x.y.github.io", "y.github.io"),  # a private suffix: each user a party
        ("http://127.0.0.1:9000", "127.0.0.1"),
        ("http://[::1]:9000", "::1"),
        ("http://localhost:8080", "localhost"),
        ("https://co.uk", "co.uk"),
        ("not an origin", "not an origin"),
    ],
)
def test_the_party_of_an_origin(origin: str, party: str) -> None:
    assert party_of(origin) == party


def test_twenty_subdomains_hold_one_place_and_another_party_is_still_asked(
    engine: Engine,
) -> None:
    def opened() -> int:
        return engine.log.read_text(errors="replace").count("event=consent-open")

    async def main() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with aiohttp.ClientSession() as session:

            async def ask(origin: str) -> Any:
                body = {"origin": origin, "manifest": GEO_MANIFEST, "userActivation": True}
                async with session.post(
                    f"{engine.url}/v1/extension/request", json=body, headers=HEADERS
                ) as answer:
                    return (await answer.json())["grant"]

            before = opened()
            many = [asyncio.create_task(ask(f"https://s{n}.example.org")) for n in range(20)]
            await until(lambda: sum(task.done() for task in many) >= 19, "19 answered at once")
            seen["refused at once"] = [task.result() for task in many if task.done()]
            other = asyncio.create_task(ask("https://other-party.net"))
            await until(lambda: opened() - before >= 2 or other.done(), "the other's consent")
            seen["shown"] = opened() - before
            seen["other answered"] = other.done() and other.result()
            for task in [*many, other]:  # the visitor never answers: each closes with its asker
                task.cancel()
            await asyncio.gather(*many, other, return_exceptions=True)
            origins = [f"https://s{n}.example.org" for n in range(20)] + ["https://other-party.net"]
            for origin in origins:
                forget = {"action": "forget", "origin": origin}
                async with session.post(
                    f"{engine.url}/v1/sites/change", json=forget, headers=HEADERS
                ) as done:
                    await done.read()
        return seen

    seen = asyncio.run(main())
    assert seen["refused at once"] == [None] * 19
    assert seen["shown"] == 2
    assert seen["other answered"] is False
