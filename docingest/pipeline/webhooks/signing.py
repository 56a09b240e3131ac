"""The signature of a delivery: `sha256=` and the hex HMAC-SHA256, keyed by the webhook's
secret, of `{timestamp}.{body}`. Receivers check it with `docingest.verify_signature`, which
holds the same few lines (the SDK must not import the server); a test checks they agree."""

from __future__ import annotations

import hashlib
import hmac


def signature(secret: str, timestamp: str, body: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()
