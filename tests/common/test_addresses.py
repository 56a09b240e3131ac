"""One table of hostile and allowed hosts for the one address guard (`docingest.common.addresses`),
run against the guard itself and through both of its callers: the webhook URL check (the
service) and the MCP server's `FetchPolicy` (the client). A case added here covers all three.

Every host is a literal or a name the resolver answers locally (no DNS query is made).
"""

from __future__ import annotations

import pytest

from docingest.adapters.fetch_policy import FetchPolicy, NotAllowed
from docingest.common.addresses import (
    AddressNotAllowed,
    forbidden_reason,
    resolve,
    resolve_public,
)
from docingest.pipeline.errors import WebhookUrlNotAllowed
from docingest.pipeline.webhooks.urls import check_url

HOSTILE = {
    # loopback, in every spelling a resolver accepts
    "127.0.0.1": "loopback",
    "127.255.255.254": "loopback",
    "127.1": "loopback",
    "2130706433": "loopback",  # decimal
    "0x7f000001": "loopback",  # hex
    "0x7f.1": "loopback",
    "0x7f.0.0.1": "loopback",
    "0177.0.0.1": "loopback",  # octal
    "017700000001": "loopback",
    "localhost": "loopback",
    "::1": "loopback",
    "0:0:0:0:0:0:0:1": "loopback",
    "::ffff:127.0.0.1": "loopback",  # IPv4-mapped
    "::ffff:7f00:1": "loopback",
    "::127.0.0.1": "loopback",  # IPv4-compatible
    "2002:7f00:1::1": "loopback",  # 6to4
    "64:ff9b::127.0.0.1": "loopback",  # NAT64
    # unspecified: connecting to it reaches the host itself
    "0.0.0.0": "unspecified",
    "0": "unspecified",
    "::": "unspecified",
    "::ffff:0.0.0.0": "unspecified",
    # private ranges
    "10.0.0.1": "private",
    "012.0.0.1": "private",  # octal 10.0.0.1
    "172.16.0.1": "private",
    "192.168.1.1": "private",
    "3232235777": "private",  # decimal 192.168.1.1
    "0xc0a80101": "private",
    "::ffff:10.0.0.1": "private",
    "::ffff:192.168.1.1": "private",
    "fc00::1": "private",
    "fd00:ec2::254": "private",  # a cloud metadata endpoint over IPv6
    "2002:c0a8:101::1": "private",  # 6to4 of 192.168.1.1
    "64:ff9b::10.0.0.1": "private",  # NAT64 of 10.0.0.1
    "64:ff9b:1::a00:1": "private",  # a local-use NAT64 prefix
    # link-local (the cloud metadata endpoint) and site-local
    "169.254.169.254": "link-local",
    "2852039166": "link-local",  # decimal 169.254.169.254
    "0xa9.0xfe.0xa9.0xfe": "link-local",
    "::ffff:169.254.169.254": "link-local",
    "fe80::1": "link-local",
    "fe80::1%lo": "link-local",  # a zone id, by name
    "fe80::1%1": "link-local",  # and by number
    "fec0::1": "site-local",
    # multicast and broadcast
    "224.0.0.1": "multicast",
    "239.255.255.250": "multicast",
    "::ffff:224.0.0.1": "multicast",
    "ff02::1": "multicast",
    "ff0e::1": "multicast",
    "255.255.255.255": "private",
    # shared, documentation, benchmarking and reserved ranges
    "100.64.0.1": "non-global",
    "192.0.2.1": "private",
    "198.18.0.1": "private",
    "240.0.0.1": "private",
    "2001:db8::1": "private",
    "2001::1": "private",  # Teredo
    "::8.8.8.8": "reserved",  # IPv4-compatible: deprecated, even around a public address
}
"""Host → the reason the guard gives (its first word, an embedded address's reason first)."""

ALLOWED = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.215.14",
    "134744072",  # decimal 8.8.8.8
    "0x08080808",
    "::ffff:8.8.8.8",  # IPv4-mapped: the kernel connects to 8.8.8.8 itself
    "2001:4860:4860::8888",
    "2606:4700:4700::1111",
]


def _url(host: str) -> str:
    return f"http://[{host}]/page" if ":" in host else f"http://{host}/page"


hostile = pytest.mark.parametrize("host", list(HOSTILE))
allowed = pytest.mark.parametrize("host", ALLOWED)


@hostile
def test_the_guard_refuses(host: str) -> None:
    with pytest.raises(AddressNotAllowed) as refused:
        resolve_public(host)
    assert refused.value.reason.split()[0] == HOSTILE[host]
    assert forbidden_reason(refused.value.address) == refused.value.reason


@allowed
def test_the_guard_allows(host: str) -> None:
    addresses = resolve_public(host)
    assert addresses and all(forbidden_reason(address) is None for address in addresses)


@hostile
def test_a_webhook_url_is_refused(host: str) -> None:
    with pytest.raises(WebhookUrlNotAllowed, match=HOSTILE[host]):
        check_url(_url(host), allow_private=False)


@allowed
def test_a_webhook_url_is_allowed(host: str) -> None:
    assert check_url(_url(host), allow_private=False).addresses == resolve(host)


@hostile
def test_a_fetch_is_refused(host: str) -> None:
    with pytest.raises(NotAllowed, match=f"non-public address \\({HOSTILE[host]}"):
        FetchPolicy(allow_urls=["http://"]).check_url(_url(host))


@allowed
def test_a_fetch_is_allowed(host: str) -> None:
    _, address = FetchPolicy(allow_urls=["http://"]).check_url(_url(host))
    assert address == resolve(host)[0]


def test_both_callers_let_an_operator_allow_private_addresses() -> None:
    assert check_url(_url("127.0.0.1"), allow_private=True).addresses == ("127.0.0.1",)
    policy = FetchPolicy(allow_urls=["http://"], allow_private=True)
    assert policy.check_url(_url("127.0.0.1")) == ("127.0.0.1", "127.0.0.1")


def test_a_zone_id_is_no_part_of_the_address() -> None:
    assert forbidden_reason("fe80::1%eth0") == "link-local"
    assert forbidden_reason("::1%eth0") == "loopback"  # no resolver accepts it; the guard does
    assert all("%" not in address for address in resolve("fe80::1%lo"))
