"""Which webhook URLs may be called: absolute http(s) URLs whose host resolves only to public
addresses (`docingest.common.addresses`, the guard every outbound fetch shares), unless
`webhook_allow_private` (so webhooks are no path into the deployment's own network: a cloud
metadata endpoint, Redis, Qdrant, an admin panel).

Checked when a URL is given (PUT of a webhook, an upload's `callback_url`) and again before
each attempt, after resolving the name; the attempt then connects to the address checked, so
a name that resolves to a public address for the check and a private one for the connection
(DNS rebinding) gets nowhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from docingest.common.addresses import (
    AddressNotAllowed,
    HostNotResolved,
    resolve,
    resolve_public,
)
from docingest.pipeline.errors import InvalidWebhookUrl, WebhookUrlNotAllowed

MAX_URL_CHARS = 2048
MIN_SECRET_CHARS = 16
MAX_SECRET_CHARS = 256
"""A signing secret's length (a webhook's `secret`, an upload's `callback_secret`)."""


@dataclass(frozen=True, slots=True)
class Target:
    """A checked URL and the addresses its host resolved to (the first is connected to)."""

    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[str, ...]


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
        addresses = resolve(host, port) if allow_private else resolve_public(host, port)
    except HostNotResolved as exc:
        raise InvalidWebhookUrl(f"The webhook URL's host {host!r} does not resolve.") from exc
    except AddressNotAllowed as exc:
        raise WebhookUrlNotAllowed(
            f"The webhook URL's host {host!r} resolves to {exc.address}, a {exc.reason} "
            "address; webhooks may only call public addresses (an operator may allow "
            "private ones with DOCINGEST_WEBHOOK_ALLOW_PRIVATE)."
        ) from exc
    return Target(url=url, scheme=parts.scheme, host=host, port=port, addresses=tuple(addresses))
