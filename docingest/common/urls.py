"""URLs shown to people: a URL with its password hidden, for messages and logs."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["redact_url"]


def redact_url(url: str) -> str:
    """Return `url` with its password (userinfo or `password=` query) replaced by `***`."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:***@{hostport}"
    query = "&".join(
        f"{key}=***" if key == "password" else f"{key}={value}" if sep else key
        for key, sep, value in (item.partition("=") for item in parts.query.split("&") if item)
    )
    return (
        f"{parts.scheme}://{netloc}{parts.path}"
        + (f"?{query}" if query else "")
        + (f"#{parts.fragment}" if parts.fragment else "")
    )
