"""Where the wallet may connect: the site's name resolved by the wallet itself, and only to
public addresses."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult

from byoa_skills.protocol.refusal import Refusal


class AddressRefused(Refusal):
    """The endpoint's name resolves to nothing the wallet may connect to; ``unresolved`` when
    it resolves to nothing at all (which may pass), rather than to refused addresses."""

    code = "endpoint-private-address"

    def __init__(self, message: str, *, unresolved: bool = False) -> None:
        super().__init__(self.code, message, text=message)
        self.unresolved = unresolved


#: IPv6 ranges that carry an IPv4 address in their last 32 bits: IPv4-mapped, IPv4-translated
#: (RFC 2765), IPv4-compatible (deprecated) and the well-known NAT64 prefix (RFC 6052).
_EMBEDS_IPV4_LAST = tuple(
    ipaddress.IPv6Network(net)
    for net in ("::ffff:0:0/96", "::ffff:0:0:0/96", "::/96", "64:ff9b::/96")
)
#: IPv6 ranges never taken as public, whatever Python's tables say: local-use NAT64 (RFC 8215),
#: whose translator is inside someone's network.
_NEVER_PUBLIC = (ipaddress.IPv6Network("64:ff9b:1::/48"),)


def is_public(address: str) -> bool:
    """Whether ``address`` is a public unicast address (not private, loopback, link-local,
    multicast, reserved, shared, documentation or unspecified). An IPv6 address that carries
    an IPv4 one (IPv4-mapped, IPv4-translated, IPv4-compatible, NAT64 ``64:ff9b::/96``, 6to4
    ``2002::/16``) is judged as the IPv4 address it carries; local-use NAT64
    (``64:ff9b:1::/48``) is never public."""
    parsed = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(parsed, ipaddress.IPv6Address):
        if any(parsed in network for network in _NEVER_PUBLIC):
            return False
        carried = _carried_ipv4(parsed)
        if carried is not None:
            parsed = carried
    return parsed.is_global and not parsed.is_multicast


def _carried_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.sixtofour is not None:
        return address.sixtofour
    if int(address) <= 1:  # :: and ::1 are themselves, not IPv4-compatible forms
        return None
    for network in _EMBEDS_IPV4_LAST:
        if address in network:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


async def resolve_public(host: str, port: int, *, allow_loopback: bool = False) -> ResolveResult:
    """The first address of ``host`` the wallet may use, resolved here; ``allow_loopback``
    (the developer switch, for ``localhost`` only) also takes 127.0.0.1 and ::1."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as error:
        raise AddressRefused(
            f"{host} does not resolve: {error.strerror or error}", unresolved=True
        ) from None
    for family, _, proto, _, sockaddr in infos:
        address = str(sockaddr[0])
        loopback = ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
        if is_public(address) or (allow_loopback and loopback):
            return ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=family,
                proto=proto,
                flags=socket.AI_NUMERICHOST,
            )
    shown = ", ".join(sorted({str(info[4][0]) for info in infos}))
    raise AddressRefused(f"{host} resolves only to addresses the wallet refuses ({shown})")


class PinnedResolver(AbstractResolver):
    """Answers only for the one name already checked, with the address already checked: the
    connection goes exactly where the check looked, whatever DNS says a moment later."""

    def __init__(self, checked: ResolveResult) -> None:
        self._checked = checked

    async def resolve(
        self, host: str, port: int = 0, family: Any = socket.AF_INET
    ) -> list[ResolveResult]:
        if host != self._checked["hostname"]:
            raise OSError(f"the wallet connects only to {self._checked['hostname']}")
        return [ResolveResult(**{**self._checked, "port": port or self._checked["port"]})]

    async def close(self) -> None:
        """Nothing to release."""
