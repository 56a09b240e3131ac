"""Page cursors, one format for every listing: opaque to clients, bound to the listing that
made them.

A cursor is `c2.<position>.<check>`: the position where the next page starts (what a listing
puts there is its own business: a document id, a version and chunk index), base64url, and a
check over the listing's kind, its index, its scope (the document whose chunks are listed) and
the position. A cursor changed by hand, truncated, or made by another index, kind or document
fails the check and is `InvalidCursor` (400 `invalid_cursor`), never read as a position.

The check is a digest, not a keyed signature: the service holds no secret every process
shares, and a cursor grants nothing (it says where a listing the caller may read anyway
resumes), so what matters is that a mistaken or mangled cursor is refused rather than obeyed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import unicodedata

from docingest.pipeline.errors import InvalidCursor

PREFIX = "c2."
"""The format's version; `c1.` cursors (document ids, unchecked) are refused."""
MAX_CURSOR_CHARS = 4096
_CHECK_BYTES = 12
_PROBLEM = "The cursor is not one this service handed out for this listing; start again without it."


def encode_cursor(position: str, *, kind: str, index: str, scope: str = "") -> str:
    """A cursor for `position` in the listing of `kind` in `index` (and `scope`)."""
    raw = position.encode("utf-8", "surrogatepass")
    return f"{PREFIX}{_b64(raw)}.{_b64(_check(raw, kind=kind, index=index, scope=scope))}"


def decode_cursor(cursor: str, *, kind: str, index: str, scope: str = "") -> str:
    """The position a cursor of `encode_cursor` for this listing holds; `InvalidCursor` for
    anything else (another format, a changed or cut cursor, another listing's)."""
    if len(cursor) > MAX_CURSOR_CHARS or not cursor.startswith(PREFIX):
        raise InvalidCursor(_PROBLEM)
    body, _, check = cursor[len(PREFIX) :].rpartition(".")
    try:
        raw, given = _unb64(body), _unb64(check)
        position = raw.decode("utf-8")
    except (binascii.Error, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise InvalidCursor(_PROBLEM) from exc
    expected = _check(raw, kind=kind, index=index, scope=scope)
    if not body or not hmac.compare_digest(given, expected):
        raise InvalidCursor(_PROBLEM)
    if any(unicodedata.category(char) == "Cc" for char in position):
        raise InvalidCursor(_PROBLEM)
    return position


def _check(raw: bytes, *, kind: str, index: str, scope: str) -> bytes:
    fields = [part.encode("utf-8", "surrogatepass") for part in (kind, index, scope)] + [raw]
    # Each field after its length, so no two listings and positions hash the same bytes.
    message = b"".join(len(field).to_bytes(4, "big") + field for field in fields)
    return hashlib.blake2b(message, digest_size=_CHECK_BYTES, person=b"docingest-cur").digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    if "=" in text:  # the padding is never sent; refuse rather than ignore it
        raise ValueError("padded")
    return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
