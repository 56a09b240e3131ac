"""API keys: `Authorization: Bearer <key>`, each key with a role, maybe limited to some
indexes; and whose principals a request reads with (`X-Docingest-Principals`).

Keys come from the settings (`DOCINGEST_API_KEYS`) or are made at run time and kept hashed in
Redis (`docingest.pipeline.api_keys`). Settings keys are compared as sha256 digests with
`hmac.compare_digest`, against every configured key (no early exit), so timing tells nothing
about which key or how much of it matched; a run-time key is found by its digest in Redis.
Settings keys may be configured as their sha256, so the clear key need not sit in the
environment. With no settings key the API is open (the embedded default, on 127.0.0.1): a
request without a key is an admin, one with a run-time key is that key's caller, and one with
a revoked run-time key is refused. Open is no security boundary: anyone may leave the key out.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass

from fastapi import Request

from docingest.pipeline.api_keys import SECRET_PREFIX, ApiKeyStore, KeyRecord, Role, check_grant
from docingest.pipeline.errors import Forbidden, InvalidAccess, Unauthorized
from docingest.pipeline.settings import ApiKey
from docingest.pipeline.store import ADMIN, Reader
from docingest.pipeline.store.access import MAX_READER_PRINCIPALS, validate_principals

PRINCIPALS_HEADER = "x-docingest-principals"
"""The principals a service key (or an admin key narrowing itself) acts for in one request:
`user:alice,group:legal`, or a JSON list for ids that hold commas."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: the key's role, the `indexes` it may use (None: all), and for a
    `user` key the principals it holds."""

    name: str | None
    indexes: frozenset[str] | None
    role: Role = "admin"
    principals: frozenset[str] = frozenset()
    digest: str | None = None
    """The hex sha256 of a run-time key (checked again by long requests); None otherwise."""

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

    def check_admin(self, what: str, *, every_index: bool = False) -> None:
        """Raise `Forbidden` unless this is an admin key (and, with `every_index`, one not
        limited to some indexes)."""
        if self.role != "admin":
            raise Forbidden(f"{what} takes an admin API key.")
        if every_index and self.indexes is not None:
            raise Forbidden(f"{what} takes an admin API key that is not limited to some indexes.")

    def reader(self, header: str | None) -> Reader:
        """Whose eyes this request reads with: an admin sees everything (or, naming
        principals in the header, only what they may see); a service holds the principals
        it names (only `public` without the header); a user its own, and may not name any."""
        if self.role == "user":
            if header is not None:
                raise Forbidden(
                    "A user API key holds its own principals; it may not send "
                    "X-Docingest-Principals (a service key acts for the principals it names)."
                )
            return Reader.of(self.principals)
        if header is None:
            return ADMIN if self.role == "admin" else Reader.of(())
        return Reader.of(parse_principals_header(header))


ANYONE = Caller(name=None, indexes=None)


def parse_principals_header(raw: str) -> list[str]:
    """The principals of an `X-Docingest-Principals` value: comma-separated, or a JSON list
    (for ids holding a comma); `InvalidAccess` for anything else."""
    text = raw.strip()
    if text.startswith("["):
        try:
            listed = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise InvalidAccess("X-Docingest-Principals is not a valid JSON list.") from exc
    else:
        listed = [part.strip() for part in text.split(",") if part.strip()]
    return validate_principals(listed, most=MAX_READER_PRINCIPALS, what="X-Docingest-Principals")


def _caller(record: KeyRecord, digest: str | None) -> Caller:
    return Caller(
        name=record.name,
        indexes=None if record.indexes is None else frozenset(record.indexes),
        role=record.role,
        principals=frozenset(record.principals),
        digest=digest,
    )


class KeyRing:
    """The settings' keys, ready to check, and the run-time keys in Redis."""

    def __init__(self, keys: list[ApiKey], store: ApiKeyStore | None = None) -> None:
        self._entries = [
            (
                key.digest(),
                Caller(
                    name=key.name,
                    indexes=None if key.indexes is None else frozenset(key.indexes),
                    role=key.role,
                    principals=frozenset(check_grant(key.role, key.principals)),
                ),
            )
            for key in keys
        ]
        self.store = store

    @property
    def enabled(self) -> bool:
        return bool(self._entries)

    def authenticate(self, request: Request) -> Caller:
        """Return the caller, or raise `Unauthorized`."""
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            if not self._entries:
                return ANYONE
            raise Unauthorized("An API key is required: send 'Authorization: Bearer <key>'.")
        digest = hashlib.sha256(token.strip().encode()).digest()
        found: Caller | None = None
        for known, caller in self._entries:
            if hmac.compare_digest(digest, known) and found is None:
                found = caller
        if found is None and self.store is not None:
            record = self.store.find(digest.hex())
            if record is not None:
                found = _caller(record, digest.hex())
        if found is not None:
            return found
        if not self._entries and not token.strip().startswith(SECRET_PREFIX):
            return ANYONE  # keys are not required: an unknown one is ignored, as before
        # (a revoked run-time key is refused even then, rather than read as no key at all)
        raise Unauthorized("The API key is not valid.")

    def check_still_valid(self, caller: Caller) -> None:
        """Raise `Unauthorized` if the caller's run-time key was revoked since the request
        began (for a request that runs long before it acts, such as an upload)."""
        if caller.digest is not None and self.store is not None:
            if not self.store.still_valid(caller.digest):
                raise Unauthorized("The API key is not valid.")
