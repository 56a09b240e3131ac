"""One delivery attempt: check the URL again after resolving it, POST the signed body to the
address checked, and say whether the receiver took it (a 2xx within the timeout).

The standard library's `http.client` rather than httpx (used elsewhere): a third of the CPU
per attempt, which is what a delivery costs the process that also ingests (BENCHMARKS.md,
"Webhooks"); and it does nothing on its own (no redirects, no proxy from the environment, no
pool keyed by host name). Connections are kept between attempts only by address
(`docingest.pipeline.webhooks.connections`).
Redirects are never followed: a 3xx is a failed attempt (a redirect could point anywhere, the
deployment's own network included).
"""

from __future__ import annotations

import http.client
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from docingest.pipeline.errors import InvalidWebhookUrl, WebhookUrlNotAllowed
from docingest.pipeline.webhooks.connections import Connections, key_for
from docingest.pipeline.webhooks.signing import signature
from docingest.pipeline.webhooks.urls import Target, check_url

USER_AGENT = "docingest-webhooks/1"
ERROR_BODY_BYTES = 200
"""How much of a refusing receiver's answer the delivery log keeps."""
KEPT_ANSWER_BYTES = 64 * 1024
"""A 2xx answer up to this long is read, so its connection can be kept; a longer one's
connection is closed instead."""

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
        http.client.HTTPConnection.connect(self)  # TCP to the address, with TCP_NODELAY
        self.sock = _TLS.wrap_socket(self.sock, server_hostname=self._server_name)


def pinned_connection(target: Target, timeout: float) -> http.client.HTTPConnection:
    """A connection to the address `target` was checked at (never the name resolved again);
    sources' web fetches use it too."""
    return _connection(target, timeout)


def _connection(target: Target, timeout: float) -> http.client.HTTPConnection:
    address = target.addresses[0]
    if target.scheme == "https":
        return _PinnedHTTPS(address, target.port, host=target.host, timeout=timeout)
    return http.client.HTTPConnection(address, target.port, timeout=timeout)


def attempt(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    timeout: float,
    allow_private: bool,
    connections: Connections | None = None,
) -> Attempt:
    """POST `body` to `url` once (see the module docstring), on a connection kept in
    `connections` when there is one for the address checked, and keeping it afterwards."""
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
    key = key_for(target)
    kept = connections.take(key) if connections is not None else None
    connection = kept or _connection(target, timeout)
    keep = False
    try:
        try:
            response = _post(connection, path, body, request_headers)
        except ConnectionError:
            if kept is None:
                raise
            # The receiver closed the kept connection meanwhile: once more on a new one.
            connection.close()
            connection = _connection(target, timeout)
            response = _post(connection, path, body, request_headers)
        code = response.status
        seconds = time.monotonic() - started
        if 200 <= code < 300:
            keep = connections is not None and _drained(response, connection, started + timeout)
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
        if keep and connections is not None:
            connections.give_back(key, connection)
        else:
            connection.close()


def _drained(
    response: http.client.HTTPResponse, connection: http.client.HTTPConnection, deadline: float
) -> bool:
    """Read a 2xx answer's body before the attempt's deadline, when it declares a length of at
    most `KEPT_ANSWER_BYTES`; whether the connection can carry another request. A chunked,
    long or slow body closes the connection instead, so a receiver cannot hold a sender past
    the timeout by dribbling it. The delivery is taken whatever happens here."""
    length = response.length
    if response.will_close or response.chunked or length is None or length > KEPT_ANSWER_BYTES:
        return False
    try:
        while response.length:  # the bytes still to come
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            connection.sock.settimeout(remaining)  # each read is one receive at most
            if not response.read1(response.length):
                return False  # the receiver hung up
        response.read()  # nothing left: ends the answer, so the connection takes another
        connection.sock.settimeout(connection.timeout)
    except (OSError, ValueError, http.client.HTTPException):  # ValueError: a closed file
        return False
    return response.isclosed()


def _post(
    connection: http.client.HTTPConnection, path: str, body: bytes, headers: dict[str, str]
) -> http.client.HTTPResponse:
    connection.request("POST", path, body=body, headers=headers)
    return connection.getresponse()


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
