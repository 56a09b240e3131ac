"""The address rule for every URL a source reads (an S3 endpoint, a web page): the webhooks'
rule, through the one guard (`docingest.common.addresses`): http(s), a host that resolves,
and only to public addresses unless `sources_allow_private`."""

from __future__ import annotations

from urllib.parse import urlsplit

from docingest.common.addresses import AddressNotAllowed, HostNotResolved, resolve, resolve_public
from docingest.pipeline.errors import InvalidSource
from docingest.pipeline.settings import Settings

MAX_URL_CHARS = 2048


def check_source_url(url: str, settings: Settings, *, what: str) -> None:
    """Refuse `url` with `InvalidSource` unless a source may read it (`what` names it)."""
    if not url or len(url) > MAX_URL_CHARS or any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise InvalidSource(f"The {what} must be a URL of 1-{MAX_URL_CHARS} characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidSource(f"The {what} cannot be parsed: {exc}.") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidSource(f"The {what} must be an http or https URL with a host.")
    if parts.username is not None or parts.password is not None:
        raise InvalidSource(f"The {what} must not carry credentials.")
    port = port or (443 if parts.scheme == "https" else 80)
    try:
        if settings.sources_allow_private:
            resolve(parts.hostname, port)
        else:
            resolve_public(parts.hostname, port)
    except HostNotResolved as exc:
        raise InvalidSource(f"The {what}'s host {parts.hostname!r} does not resolve.") from exc
    except AddressNotAllowed as exc:
        raise InvalidSource(
            f"The {what}'s host {parts.hostname!r} resolves to {exc.address}, a {exc.reason} "
            "address; sources may only read public addresses (an operator may allow private "
            "ones with DOCINGEST_SOURCES_ALLOW_PRIVATE)."
        ) from exc
