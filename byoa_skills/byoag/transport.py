"""The connector's HTTP client for one platform: to the address it resolved and checked
itself, with TLS verified for the platform's name (plain HTTP only in loopback development),
no redirects followed, no proxy, no cookies, short timeouts and small answers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp

from byoa_skills.byoag.errors import ByoagError
from byoa_skills.byoag.hostname import PlatformHost
from byoa_skills.directlink.addresses import AddressRefused, PinnedResolver, resolve_public

#: The most bytes of an answer the connector reads.
MAX_ANSWER = 64 * 1024
TIMEOUT = aiohttp.ClientTimeout(total=15, connect=5, sock_read=10)


@dataclass(frozen=True)
class Answer:
    """A platform's answer: its status, media type, and body as JSON (None when the body is
    not JSON)."""

    status: int
    content_type: str
    body: Any


class PlatformClient:
    """Requests to one platform's origin; open it with :func:`platform_client`."""

    def __init__(self, platform: PlatformHost, session: aiohttp.ClientSession, failure: str):
        self.platform = platform
        self._session = session
        self._failure = failure

    async def get(self, url: str, headers: dict[str, str] | None = None) -> Answer:
        """``GET url``; see :meth:`request`."""
        return await self.request("GET", url, headers=headers)

    async def post(self, url: str, body: Any, headers: dict[str, str] | None = None) -> Answer:
        """``POST url`` with a JSON ``body``; see :meth:`request`."""
        return await self.request("POST", url, body=body, headers=headers)

    async def request(
        self, method: str, url: str, *, body: Any = None, headers: dict[str, str] | None = None
    ) -> Answer:
        """One request to a URL on the platform's origin. A redirect, a connection failure or
        an answer over 64 KiB is a :class:`ByoagError` with this client's failure code."""
        if not url.startswith(self.platform.origin + "/"):
            raise ByoagError(
                self._failure,
                f"{url[:100]} is not on {self.platform.origin}",
                reason="other-origin",
            )
        sent = {"Accept": "application/json", **(headers or {})}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        try:
            async with self._session.request(
                method, url, data=data, headers=sent, allow_redirects=False
            ) as response:
                if 300 <= response.status < 400:
                    raise ByoagError(
                        self._failure,
                        f"the platform answered {url} with a redirect ({response.status})",
                        reason="redirect",
                    )
                raw = await read_bounded(response.content, MAX_ANSWER + 1)
                status, content_type = response.status, response.content_type
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            raise ByoagError(
                self._failure,
                f"{url} cannot be reached: {error or type(error)}",
                reason="unreachable",
            ) from None
        if len(raw) > MAX_ANSWER:
            raise ByoagError(
                self._failure,
                f"the answer of {url} is over {MAX_ANSWER} bytes",
                reason="answer-too-large",
            )
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        return Answer(status, content_type, parsed)

    def fails_with(self, code: str) -> None:
        """From now on, a redirect or a failure to connect is ``code``."""
        self._failure = code


async def read_bounded(stream: aiohttp.StreamReader, limit: int) -> bytes:
    """The whole body, however many pieces it arrives in, stopping once ``limit`` bytes are
    read (an answer that long is refused by the caller)."""
    pieces: list[bytes] = []
    taken = 0
    while taken < limit:
        piece = await stream.read(limit - taken)
        if not piece:
            break
        pieces.append(piece)
        taken += len(piece)
    return b"".join(pieces)


@asynccontextmanager
async def platform_client(platform: PlatformHost, failure: str) -> AsyncIterator[PlatformClient]:
    """A client for ``platform``, after its name resolved to an address the connector may
    use: public, or loopback in loopback development. ``failure`` is the code of a refused
    address, a redirect or a connection that fails."""
    try:
        address = await resolve_public(
            platform.host, platform.port, allow_loopback=not platform.secure
        )
    except AddressRefused as refused:
        reason = "unresolved" if refused.unresolved else "private-address"
        raise ByoagError(failure, str(refused), reason=reason) from None
    connector = aiohttp.TCPConnector(resolver=PinnedResolver(address), use_dns_cache=False)
    async with aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
        timeout=TIMEOUT,
        auto_decompress=True,
    ) as session:
        yield PlatformClient(platform, session, failure)
