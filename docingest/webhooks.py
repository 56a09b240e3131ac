"""Check that a webhook delivery came from docingest: `verify_signature(body, headers, secret)`.

The standard library only, so a receiver can copy this file or import it without the server's
dependencies. A delivery carries `X-Docingest-Timestamp` (Unix seconds) and
`X-Docingest-Signature: sha256=<hex HMAC-SHA256 of "{timestamp}.{body}">`, keyed by the
webhook's secret. A signature is accepted only while the timestamp is within `tolerance`
seconds of now (the replay window, 5 minutes by default): a recorded delivery replayed later
is refused. Each attempt is signed afresh, so a retry hours later still verifies. Dedupe on
`X-Docingest-Delivery`: delivery is at least once.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

__all__ = ["DEFAULT_TOLERANCE_SECONDS", "InvalidSignature", "verify_signature"]

DEFAULT_TOLERANCE_SECONDS = 300
"""The replay window: how far the delivery's timestamp may be from the receiver's clock."""


class InvalidSignature(ValueError):
    """The delivery is not signed by this secret, or its timestamp is outside the window."""


def _header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def verify_signature(
    body: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    *,
    tolerance: float = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> None:
    """Raise `InvalidSignature` unless `body` (the raw request body, as received) was signed
    with `secret` at a time within `tolerance` seconds of `now` (default: the clock).

    `headers` is any mapping of the request's headers (names in any case).
    """
    timestamp = _header(headers, "X-Docingest-Timestamp")
    given = _header(headers, "X-Docingest-Signature")
    if not timestamp or not given:
        raise InvalidSignature("the delivery has no X-Docingest-Timestamp or -Signature header")
    try:
        sent_at = int(timestamp)
    except ValueError:
        raise InvalidSignature("X-Docingest-Timestamp is not a Unix time") from None
    current = time.time() if now is None else now
    if abs(current - sent_at) > tolerance:
        raise InvalidSignature(
            f"the delivery was signed {current - sent_at:.0f} s from now, outside the "
            f"{tolerance:g} s window (a replay, or a clock that is off)"
        )
    data = body.encode() if isinstance(body, str) else bytes(body)
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + data, hashlib.sha256)
    expected = "sha256=" + digest.hexdigest()
    # Compare every candidate: a future key rotation may send several, comma-separated.
    candidates = [part.strip() for part in given.split(",")]
    if not any(hmac.compare_digest(expected, candidate) for candidate in candidates):
        raise InvalidSignature("the signature does not match the body and the secret")
