"""Optional API keys: `Authorization: Bearer <key>`, each key allowed on listed indexes.

Keys are compared as sha256 digests with `hmac.compare_digest`, against every configured key
(no early exit), so timing tells nothing about which key or how much of it matched. Keys may
be configured as their sha256, so the clear key need not sit in the environment.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from fastapi import Request

from docingest.pipeline.errors import Forbidden, Unauthorized
from docingest.pipeline.settings import ApiKey


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: `indexes` they may use (None: all)."""

    name: str | None
    indexes: frozenset[str] | None

    def may_use(self, index: str) -> bool:
        return self.indexes is None or index in self.indexes

    def check(self, index: str) -> None:
        """Raise `Forbidden` unless this caller may use `index`. The message names no index:
        a job's id may belong to an index the caller should not learn of."""
        if not self.may_use(index):
            raise Forbidden("This API key is not allowed to use that index.")

    def check_every_index(self, what: str) -> None:
        """Raise `Forbidden` unless this caller may use every index (a key not limited to
        some), as `what`, which reports on all of them, needs."""
        if self.indexes is not None:
            raise Forbidden(
                f"{what} reports on every index; it needs an API key that is not limited to "
                "some indexes (GET /v1/indexes/{index} gives an index's own usage)."
            )


ANYONE = Principal(name=None, indexes=None)


class KeyRing:
    """The configured keys, ready to check."""

    def __init__(self, keys: list[ApiKey]) -> None:
        self._entries = [
            (key.digest(), key.name, None if key.indexes is None else frozenset(key.indexes))
            for key in keys
        ]

    @property
    def enabled(self) -> bool:
        return bool(self._entries)

    def authenticate(self, request: Request) -> Principal:
        """Return the caller's principal, or raise `Unauthorized`."""
        if not self._entries:
            return ANYONE
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("An API key is required: send 'Authorization: Bearer <key>'.")
        digest = hashlib.sha256(token.strip().encode()).digest()
        found: Principal | None = None
        for known, name, indexes in self._entries:
            if hmac.compare_digest(digest, known) and found is None:
                found = Principal(name=name, indexes=indexes)
        if found is None:
            raise Unauthorized("The API key is not valid.")
        return found
