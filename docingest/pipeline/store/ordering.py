"""Documents in `document_id` order, read a page at a time: O(documents listed), not O(index).

Qdrant orders a scroll by a payload field only when it has a range index (integer, float or
datetime), and has no range over keywords, so a string cannot be its sort key. Instead each
document's record (the chunk_index 0 point) carries its id's UTF-8 bytes as integers, six
bytes each (`doc_order_0`, `doc_order_1`, ...; the last one padded with zero bytes), each with
an integer index. Six bytes keep every key exact as a float too (below 2**53): Qdrant's
`Range` bounds are floats, and a rounded bound would skip or repeat ids. Since a document id
holds no control character (the upload refuses them), the zero padding sorts a shorter id
before every longer one that starts with it: the keys' tuple order is the ids' byte order,
which for UTF-8 is the ids' code-point order, Python's `str` order.

A page then walks that tuple like a trie. `_level` asks for the next points at one depth,
ordered by that depth's key; every group of equal keys the answer holds whole is sorted by
the full id in Python, and only the group the page may have cut (the last key, in a full
page) is walked one depth down. Each request reads at most `batch` records, and the walk goes
down only as deep as ids share prefixes of 6 bytes, so a page costs about `depth × batch`
records however large the index (BENCHMARKS.md, "Document listing").

The cursor is the last id listed: documents inserted or deleted meanwhile neither repeat nor
skip the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import groupby
from typing import Any

from qdrant_client import models

ORDER_BYTES = 6
ORDER_PREFIX = "doc_order_"

Fetch = Callable[[Sequence[models.Condition], str | None, int], list[dict[str, Any]]]
"""(conditions, order field or None, limit) → payloads of the matching records, in that
field's ascending order; the caller adds the listing's own conditions (live, chunk 0, the
user's filter) and returns [] for an order field no document has."""


def order_field(depth: int) -> str:
    return f"{ORDER_PREFIX}{depth}"


def order_key(document_id: str) -> tuple[int, ...]:
    """The integers that sort like `document_id` (six UTF-8 bytes each)."""
    raw = document_id.encode("utf-8", "surrogatepass")
    return tuple(
        int.from_bytes(raw[start : start + ORDER_BYTES].ljust(ORDER_BYTES, b"\0"), "big")
        for start in range(0, max(len(raw), 1), ORDER_BYTES)
    )


def order_payload(document_id: str) -> dict[str, int]:
    """The payload fields that carry `order_key(document_id)`."""
    return {order_field(depth): value for depth, value in enumerate(order_key(document_id))}


def id_of(key: Sequence[int]) -> str | None:
    """The document id whose `order_key` is `key`; None if no id has it (the bytes end
    inside a character)."""
    raw = b"".join(value.to_bytes(ORDER_BYTES, "big") for value in key)
    try:
        return raw.rstrip(b"\0").decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None


def _equals(field: str, value: int) -> models.FieldCondition:
    return models.FieldCondition(key=field, match=models.MatchValue(value=value))


def ordered(fetch: Fetch, *, after: str | None, batch: int) -> Iterator[dict[str, Any]]:
    """Yield the records with `document_id > after` (all if None), in document_id order.

    Two live versions of one document (for the moment between a publish and the retire) come
    out next to each other; the caller keeps the newer."""
    if after is None:
        yield from _level(fetch, (), None, batch)
        return
    key = order_key(after)
    # Nearest first: ids that continue `after` past its last key, then at each depth upwards
    # the ids equal to `after` above that depth and greater at it.
    yield from _level(fetch, key, None, batch)
    for depth in reversed(range(len(key))):
        yield from _level(fetch, key[:depth], key[depth], batch)


def _level(
    fetch: Fetch, prefix: tuple[int, ...], above: int | None, batch: int
) -> Iterator[dict[str, Any]]:
    """Yield, in order, the records whose key starts with `prefix` and continues with a value
    greater than `above` (any value if None)."""
    field = order_field(len(prefix))
    same = [_equals(order_field(depth), value) for depth, value in enumerate(prefix)]
    while True:
        bound = models.Range(gte=0) if above is None else models.Range(gt=above)
        records = fetch([*same, models.FieldCondition(key=field, range=bound)], field, batch)
        if not records:
            return
        full = len(records) >= batch
        last = records[-1][field]
        for value, group in groupby(records, key=lambda record: int(record[field])):
            if full and value == last:  # the page may have cut this group: walk it whole
                deeper = (*prefix, value)
                if (exact := id_of(deeper)) is not None:  # the id that ends at this depth
                    yield from fetch([*same, _equals(field, value), _is(exact)], None, batch)
                yield from _level(fetch, deeper, None, batch)
            else:
                yield from sorted(group, key=lambda record: str(record["document_id"]))
        if not full:
            return
        above = last


def _is(document_id: str) -> models.FieldCondition:
    return models.FieldCondition(key="document_id", match=models.MatchValue(value=document_id))


def newest_versions(records: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Merge neighbours of one document_id into the record of its highest version."""
    for _, group in groupby(records, key=lambda record: record["document_id"]):
        yield max(group, key=lambda record: int(record["version"]))
