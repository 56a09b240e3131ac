"""One delivery attempt: check the URL again after resolving it, POST the signed body to the
address checked, and say whether the receiver took it (a 2xx within the timeout).

The standard library's `http.client` rather than httpx (used elsewhere): a third of the CPU
per attempt, which is what a delivery costs the process that also ingests (BENCHMARKS.md,
"Webhooks"); and it does nothing on its own (no redirects, no proxy from the environment, no
connection pool that could carry one host's request on another's connection).
Redirects are never followed: a 3xx is a failed attempt (a redirect could point anywhere, the
deployment's own network included).
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from pipeline.errors import InvalidWebhookUrl, WebhookUrlNotAllowed
from pipeline.webhooks.signing import signature
from pipeline.webhooks.urls import Target, check_url

USER_AGENT = "docingest-webhooks/1"
ERROR_BODY_BYTES = 200
"""How much of a refusing receiver's answer the delivery log keeps."""

_TLS = ssl.create_default_context()


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one attempt came to."""

    delivered: bool
    code: int | None
    error: str | None
    seconds: float


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


class _PinnedHTTPS(http.client.HTTPSConnection):
    """TLS to the checked address, with the URL's host name for SNI and the certificate."""

    def __init__(self, address: str, port: int, *, host: str, timeout: float) -> None:
        super().__init__(address, port, timeout=timeout, context=_TLS)
        self._server_name = host

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = _TLS.wrap_socket(sock, server_hostname=self._server_name)


def _connection(target: Target, timeout: float) -> http.client.HTTPConnection:
    address = target.addresses[0]
    if target.scheme == "https":
        return _PinnedHTTPS(address, target.port, host=target.host, timeout=timeout)
    return http.client.HTTPConnection(address, target.port, timeout=timeout)


def attempt(
    url: str, body: bytes, headers: dict[str, str], *, timeout: float, allow_private: bool
) -> Attempt:
    """POST `body` to `url` once (see the module docstring)."""
    started = time.monotonic()
    try:
        target = check_url(url, allow_private=allow_private)
    except (InvalidWebhookUrl, WebhookUrlNotAllowed) as exc:
        return Attempt(False, None, f"{exc.code}: {exc.message}", 0.0)
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    # Connect to the address just checked, naming the host in Host (and in TLS), so the name
    # is not resolved a second time (DNS rebinding gains nothing).
    request_headers = dict(headers, Host=parts.netloc)
    connection = _connection(target, timeout)
    try:
        connection.request("POST", path, body=body, headers=request_headers)
        response = connection.getresponse()
        code = response.status
        seconds = time.monotonic() - started
        if 200 <= code < 300:
            if seconds > timeout:  # it dripped in slower than the whole deadline
                return Attempt(False, code, f"timeout: answered after {seconds:.1f} s", seconds)
            return Attempt(True, code, None, seconds)
        return Attempt(False, code, _refusal(code, response), seconds)
    except TimeoutError:
        return Attempt(False, None, f"timeout: no answer within {timeout:g} s",
                       time.monotonic() - started)  # fmt: skip
    except (OSError, http.client.HTTPException) as exc:
        message = f"connection: {type(exc).__name__}: {exc}"[:300]
        return Attempt(False, None, message, time.monotonic() - started)
    finally:
        connection.close()


def _refusal(code: int, response: http.client.HTTPResponse) -> str:
    """The log's line for a non-2xx answer, with the start of its body or its redirect."""
    if 300 <= code < 400:
        location = response.getheader("location", "")
        return f"HTTP {code}: " + (
            f"redirect to {location[:150]} not followed" if location else "redirect not followed"
        )
    try:
        excerpt = response.read(ERROR_BODY_BYTES).decode("utf-8", "replace").strip()
    except (OSError, http.client.HTTPException):
        excerpt = ""
    return f"HTTP {code}: {excerpt}" if excerpt else f"HTTP {code}"
