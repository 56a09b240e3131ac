"""One delivery attempt: check the URL again after resolving it, POST the signed body to the
address checked, and say whether the receiver took it (a 2xx within the timeout).

Redirects are never followed: a 3xx is a failed attempt (a redirect could point anywhere,
the deployment's own network included).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from pipeline.errors import InvalidWebhookUrl, WebhookUrlNotAllowed
from pipeline.webhooks.signing import signature
from pipeline.webhooks.urls import check_url

USER_AGENT = "docingest-webhooks/1"
ERROR_BODY_BYTES = 200
"""How much of a refusing receiver's answer the delivery log keeps."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one attempt came to."""

    delivered: bool
    code: int | None
    error: str | None
    seconds: float
    permanent: bool = False
    """The URL itself is refused (no longer resolves to a public address, or never will):
    still retried, since DNS may change, but worth saying."""


def headers_for(
    *, event: str, delivery_id: str, body: bytes, secret: str, attempt: int, now: float
) -> dict[str, str]:
    """The delivery's headers; the signature only when there is a secret."""
    timestamp = str(int(now))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Docingest-Event": event,
        "X-Docingest-Delivery": delivery_id,
        "X-Docingest-Timestamp": timestamp,
        "X-Docingest-Attempt": str(attempt),
    }
    if secret:
        headers["X-Docingest-Signature"] = signature(secret, timestamp, body)
    return headers


def attempt(
    client: httpx.Client,
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    timeout: float,
    allow_private: bool,
) -> Attempt:
    """POST `body` to `url` once (see the module docstring)."""
    started = time.monotonic()
    try:
        target = check_url(url, allow_private=allow_private)
    except (InvalidWebhookUrl, WebhookUrlNotAllowed) as exc:
        return Attempt(False, None, f"{exc.code}: {exc.message}", 0.0, permanent=True)
    # Connect to the address just checked, naming the host in Host and in TLS (SNI and the
    # certificate check), so the name is not resolved a second time.
    pinned = httpx.URL(url).copy_with(host=target.addresses[0])
    request_headers = dict(headers)
    request_headers["Host"] = urlsplit(url).netloc
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    request = client.build_request(
        "POST",
        pinned,
        content=body,
        headers=request_headers,
        timeout=httpx.Timeout(timeout),
        extensions=extensions,
    )
    try:
        response = client.send(request, stream=True, follow_redirects=False)
    except httpx.TimeoutException:
        return Attempt(False, None, f"timeout: no answer within {timeout:g} s",
                       time.monotonic() - started)  # fmt: skip
    except httpx.HTTPError as exc:
        message = str(exc) or type(exc).__name__
        return Attempt(False, None, f"connection: {message}"[:300], time.monotonic() - started)
    try:
        code = response.status_code
        if 200 <= code < 300:
            seconds = time.monotonic() - started
            if seconds > timeout:  # headers dripped in slower than the whole deadline
                return Attempt(False, code, f"timeout: answered after {seconds:.1f} s", seconds)
            return Attempt(True, code, None, seconds)
        excerpt = _excerpt(response)
        return Attempt(False, code, f"HTTP {code}{': ' + excerpt if excerpt else ''}",
                       time.monotonic() - started)  # fmt: skip
    finally:
        response.close()


def _excerpt(response: httpx.Response) -> str:
    """The start of a refusing receiver's answer, for the log (never more than a few bytes)."""
    if 300 <= response.status_code < 400:
        location = response.headers.get("location", "")
        return f"redirect to {location[:150]} not followed" if location else "redirect"
    try:
        data = b""
        for chunk in response.iter_bytes():
            data += chunk
            if len(data) >= ERROR_BODY_BYTES:
                break
    except httpx.HTTPError:
        return ""
    return data[:ERROR_BODY_BYTES].decode("utf-8", "replace").strip()
