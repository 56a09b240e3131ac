"""Which webhook URLs may be called: absolute http(s) URLs whose host resolves only to public
addresses, unless `webhook_allow_private` (so webhooks are no path into the deployment's own
network: a cloud metadata endpoint, Redis, Qdrant, an admin panel).

Checked when a URL is given (PUT of a webhook, an upload's `callback_url`) and again before
each attempt, after resolving the name; the attempt then connects to the address checked, so
a name that resolves to a public address for the check and a private one for the connection
(DNS rebinding) gets nowhere.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from docingest.pipeline.errors import InvalidWebhookUrl, WebhookUrlNotAllowed

MAX_URL_CHARS = 2048
MIN_SECRET_CHARS = 16
MAX_SECRET_CHARS = 256
"""A signing secret's length (a webhook's `secret`, an upload's `callback_secret`)."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Target:
    """A checked URL and the addresses its host resolved to (the first is connected to)."""

    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...]


def forbidden_reason(address: IPAddress) -> str | None:
    """Why `address` is not a public one (None when it is)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for name in ("loopback", "link_local", "private", "multicast", "unspecified", "reserved"):
        if getattr(address, f"is_{name}"):
            return name.replace("_", "-")
    if not address.is_global:  # shared (100.64/10), documentation, benchmarking ranges
        return "non-global"
    return None


def parse_url(url: str) -> SplitResult:
    """Check the URL's form: absolute http(s), a host, no credentials; `InvalidWebhookUrl`."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise InvalidWebhookUrl(f"A webhook URL must be 1-{MAX_URL_CHARS} characters.")
    if any(ord(char) < 33 or ord(char) == 127 for char in url):
        raise InvalidWebhookUrl("A webhook URL must not contain spaces or control characters.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise InvalidWebhookUrl(f"The webhook URL cannot be parsed: {exc}.") from exc
    if parts.scheme not in ("http", "https"):
        raise InvalidWebhookUrl(f"A webhook URL must be http or https, not {parts.scheme!r}.")
    if not parts.hostname:
        raise InvalidWebhookUrl("A webhook URL must name a host.")
    if parts.username is not None or parts.password is not None:
        raise InvalidWebhookUrl(
            "A webhook URL must not carry credentials; use the webhook's secret to authenticate."
        )
    return parts


def check_url(url: str, *, allow_private: bool) -> Target:
    """Parse `url` and resolve its host; `InvalidWebhookUrl` or `WebhookUrlNotAllowed`."""
    parts = parse_url(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise InvalidWebhookUrl(f"The webhook URL's host {host!r} does not resolve.") from exc
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0]).split("%", 1)[0]  # an IPv6 zone is no part of the check
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise InvalidWebhookUrl(f"The webhook URL's host {host!r} does not resolve.")
    if not allow_private:
        for address in addresses:
            reason = forbidden_reason(ipaddress.ip_address(address))
            if reason is not None:
                raise WebhookUrlNotAllowed(
                    f"The webhook URL's host {host!r} resolves to {address}, a {reason} "
                    "address; webhooks may only call public addresses (an operator may allow "
                    "private ones with DOCINGEST_WEBHOOK_ALLOW_PRIVATE)."
                )
    return Target(url=url, scheme=parts.scheme, host=host, port=port, addresses=tuple(addresses))
