"""Which addresses an outbound request may reach: the one guard against server-side request
forgery, used by every fetch of a URL someone else gave (webhook deliveries in the service, the
MCP server's fetches in the client).

An address is public when neither it nor an IPv4 address inside it is loopback, private,
link-local, site-local, multicast, unspecified, reserved or otherwise not global. IPv4 hides in
IPv6 in several ways, each unwrapped: IPv4-mapped (`::ffff:127.0.0.1`, which the kernel connects
to as the IPv4 address itself, so only the inner address is judged), IPv4-compatible
(`::127.0.0.1`), 6to4 (`2002:7f00:1::/48`) and NAT64 (`64:ff9b::127.0.0.1`), where both are
judged. A zone id (`fe80::1%eth0`) is no part of the address. Host names, and the decimal,
octal and hex IPv4 spellings that resolvers accept (`2130706433`, `0177.0.0.1`, `0x7f.1`), are
resolved first and every address found is judged, so one private answer refuses the host.
"""

from __future__ import annotations

import ipaddress
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

NAT64_PREFIXES = (
    ipaddress.IPv6Network("64:ff9b::/96"),  # the well-known prefix (RFC 6052)
    ipaddress.IPv6Network("64:ff9b:1::/48"),  # local-use translators (RFC 8215)
)
SIXTOFOUR = ipaddress.IPv6Network("2002::/16")
_REASONS = ("unspecified", "loopback", "link_local", "multicast", "private", "reserved")


class HostNotResolved(Exception):
    """The host has no address (the name does not resolve, or it is not a valid name)."""


class AddressNotAllowed(Exception):
    """The host resolves to an address that is not public."""

    def __init__(self, host: str, address: str, reason: str) -> None:
        super().__init__(f"{host} resolves to {address}, a {reason} address")
        self.host, self.address, self.reason = host, address, reason


def parse_address(text: str) -> IPAddress:
    """An IP address from its text, without its zone id; `ValueError` if it is none."""
    return ipaddress.ip_address(text.split("%", 1)[0])


def forbidden_reason(address: IPAddress | str) -> str | None:
    """Why `address` is not a public one, e.g. "loopback" (None when it is public)."""
    if isinstance(address, str):
        address = parse_address(address)
    if isinstance(address, ipaddress.IPv6Address):
        address = ipaddress.IPv6Address(int(address))  # drop a zone id
        if address.ipv4_mapped is not None:
            return _own_reason(address.ipv4_mapped)
        embedded = _embedded_ipv4(address)
        if embedded is not None and (reason := _own_reason(embedded[1])) is not None:
            return f"{reason} (in {embedded[0]})"
    return _own_reason(address)


def resolve(host: str, port: int | None = None) -> tuple[str, ...]:
    """Every address `host` resolves to, in the resolver's order, once each, without zone ids;
    `HostNotResolved`."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:  # socket.gaierror is an OSError
        raise HostNotResolved(f"{host!r} does not resolve") from exc
    addresses = dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos)
    if not addresses:
        raise HostNotResolved(f"{host!r} does not resolve")
    return tuple(addresses)


def resolve_public(host: str, port: int | None = None) -> tuple[str, ...]:
    """`resolve`, refusing the host if any of its addresses is not public:
    `AddressNotAllowed` (or `HostNotResolved`)."""
    addresses = resolve(host, port)
    for address in addresses:
        reason = forbidden_reason(address)
        if reason is not None:
            raise AddressNotAllowed(host, address, reason)
    return addresses


def _own_reason(address: IPAddress) -> str | None:
    for name in _REASONS:
        if getattr(address, f"is_{name}"):
            return name.replace("_", "-")
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "site-local"  # fec0::/10: deprecated, but routed inside some networks
    if not address.is_global:  # shared (100.64/10), documentation, benchmarking ranges
        return "non-global"
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address carried inside `address`, and how, if any."""
    value = int(address)
    if value >> 32 == 0 and value > 1:  # ::a.b.c.d, but not :: or ::1
        return "IPv4-compatible IPv6", ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if address in SIXTOFOUR:
        return "6to4", ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF)
    if any(address in prefix for prefix in NAT64_PREFIXES):
        return "NAT64", ipaddress.IPv4Address(value & 0xFFFFFFFF)
    return None
