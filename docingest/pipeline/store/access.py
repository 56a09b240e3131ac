"""Who may see a document: its access list, the caller's principals, and the condition that
says so inside the store's own filter model.

A document's access list is stored on every point of its version in the reserved payload
field `access` (top level, beside `document_id`; user metadata lives under `metadata.`, so a
caller's filter can never name it). A caller is a `Reader`: an administrator, who sees every
document, or a set of principals. What a reader may see is a `Node` of
`docingest.pipeline.store.filters` on that field, AND-ed server-side into every read's filter
(`restrict`), so each engine compiles it as it compiles any filter and the store answers with
visible points only: `top_k` fills with visible results, counts count visible documents, and
a hidden document is a missing one. Nothing is filtered after the store answered.

    open index:        access ∈ principals  OR  no list
    restricted index:  access ∈ principals
    (principals always hold `public`; an administrator: no condition at all)

Writing (PATCH, delete, replacing by upload) takes a principal the reader holds on its own
(`public` is held by everyone, so it grants reading only), or an administrator, or, in an
open index, a document without a list, as before access lists existed.

An empty list is stored as `[NOBODY]`, a value no principal can be, so that "a list that names
no one" (administrators only) differs from "no list" (missing or null: the index's default),
which the filter tells apart with `exists`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from docingest.pipeline.errors import InvalidAccess
from docingest.pipeline.store.filters import Condition, Group, Node, SearchFilter

ACCESS_FIELD = "access"
"""The reserved payload field of a point's access list (a list of keywords)."""
PUBLIC = "public"
"""The principal every caller holds."""
NOBODY = "none"
"""Stored for an empty list: not a principal anyone can hold (principals have a prefix)."""
PREFIXES = ("user:", "group:")
MAX_PRINCIPAL_CHARS = 256
MAX_DOCUMENT_PRINCIPALS = 10_000
"""Principals on one document's list (the reliability suite stores 10,000)."""
MAX_READER_PRINCIPALS = 10_000
"""Principals one caller may hold (a key's own, or those a service names in a request)."""

AccessMode = Literal["open", "restricted"]
"""An index's rule for a document without a list: visible to all callers, or to admins only."""


def validate_principal(raw: Any) -> str:
    """Return `raw` if it is `public`, `user:<id>` or `group:<id>` (an id of 1 to 256
    characters without control characters), else raise `InvalidAccess`."""
    if raw == PUBLIC:
        return PUBLIC
    if not isinstance(raw, str) or not raw.startswith(PREFIXES):
        shown = repr(raw)[:80]
        raise InvalidAccess(
            f"Principal {shown} is invalid: use 'public', 'user:<id>' or 'group:<id>'."
        )
    ident = raw.partition(":")[2]
    if not 1 <= len(ident) <= MAX_PRINCIPAL_CHARS or any(
        unicodedata.category(char) in ("Cc", "Cs") for char in ident
    ):
        raise InvalidAccess(
            f"Principal {raw[:80]!r} is invalid: its id must be 1-{MAX_PRINCIPAL_CHARS} "
            "characters without control characters."
        )
    return raw


def validate_principals(raw: Any, *, most: int, what: str) -> list[str]:
    """Return the principals of the list `raw` (duplicates dropped, order kept)."""
    if not isinstance(raw, list | tuple):
        raise InvalidAccess(f'{what} must be a JSON list of principals, such as ["group:legal"].')
    if len(raw) > most:
        raise InvalidAccess(f"{what} may name at most {most} principals.")
    return list(dict.fromkeys(validate_principal(item) for item in raw))


def validate_access(raw: Any) -> list[str] | None:
    """A document's access list as an upload or a PATCH sends it: None (no list) or a list."""
    if raw is None:
        return None
    return validate_principals(raw, most=MAX_DOCUMENT_PRINCIPALS, what="access")


def access_payload(access: Sequence[str] | None) -> list[str] | None:
    """The stored form of an access list (an empty one as `[NOBODY]`)."""
    if access is None:
        return None
    return list(access) or [NOBODY]


def access_from_payload(value: Any) -> list[str] | None:
    """The access list a stored value holds (None: the document has none)."""
    if not isinstance(value, list) or not value:
        return None
    return [item for item in value if item != NOBODY]


@dataclass(frozen=True, slots=True)
class Reader:
    """Whose eyes a read is for. `principals` None: an administrator (everything); else the
    principals held (`public` is always added by `of`)."""

    principals: frozenset[str] | None
    own: frozenset[str] = frozenset()
    """The principals that grant writing: those held besides `public`."""

    @classmethod
    def of(cls, principals: Iterable[str]) -> Reader:
        held = frozenset(principals)
        return cls(held | {PUBLIC}, held - {PUBLIC})

    @property
    def is_admin(self) -> bool:
        return self.principals is None

    def visibility(self, mode: AccessMode) -> Node | None:
        """The condition a point must meet to be read by this reader (None: none)."""
        if self.principals is None:
            return None
        return _held_or_unlisted(self.principals, unlisted=mode == "open")

    def writability(self, mode: AccessMode) -> Node | None:
        """The condition a document must meet to be changed or deleted by this reader."""
        if self.principals is None:
            return None
        return _held_or_unlisted(self.own, unlisted=mode == "open")

    def sees(self, access: Sequence[str] | None, mode: AccessMode) -> bool:
        """`visibility` for a list outside the store (a job's document, not yet stored)."""
        if self.principals is None:
            return True
        if access is None:
            return mode == "open"
        return not self.principals.isdisjoint(access)


ADMIN = Reader(None)
"""The reader of the service's own work (workers, the command line) and of admin keys."""


def _held_or_unlisted(principals: frozenset[str], *, unlisted: bool) -> Node:
    # Sorted, so equal readers give equal filters (and engines may cache them alike).
    held: list[Node] = []
    if principals:
        listed = tuple(sorted(principals))
        held.append(Condition(ACCESS_FIELD, ACCESS_FIELD, "in", listed, "keyword"))
    if unlisted:
        held.append(Condition(ACCESS_FIELD, ACCESS_FIELD, "exists", False, None))
    if not held:  # no principal and no default: a contradiction, so nothing matches
        present = Condition(ACCESS_FIELD, ACCESS_FIELD, "exists", True, None)
        absent = Condition(ACCESS_FIELD, ACCESS_FIELD, "exists", False, None)
        return Group("and", (present, absent))
    return held[0] if len(held) == 1 else Group("or", tuple(held))


def restrict(search_filter: SearchFilter | None, condition: Node | None) -> SearchFilter | None:
    """`search_filter` AND `condition` (a `Reader`'s), as one filter of the store's model."""
    if condition is None:
        return search_filter
    children = () if search_filter is None else search_filter.root.children
    return SearchFilter(Group("and", (*children, condition)))
