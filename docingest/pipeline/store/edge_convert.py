"""Translate the subset of qdrant-client's models that the store builds into Qdrant Edge's
types, and Edge's results back.

Only what `docingest.pipeline.store.requests` produces is translated; anything else raises
`TypeError` at once, so a new kind of request fails its tests on the Edge engine instead of being
dropped. Hand-written because no library maps one binding onto the other (they share the server's
semantics, not their Python classes).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from typing import Any, cast

import numpy as np
import qdrant_edge as edge
from qdrant_client import models

from docingest.pipeline.store.requests import DENSE, KEYWORD, Point

BOOL_KEYS = "metadata_bool_keys"
"""Payload key listing the user metadata keys whose values were booleans.

qdrant-edge-py 0.9 turns `MatchValue(True)` into the integer 1, so a boolean payload value can
never be matched (tests/pipeline/store/test_edge_contract.py shows it, and fails once it is fixed).
Until then the Edge engine stores boolean metadata as 0/1, names those keys here, and turns
them back into booleans when it reads payloads; filters on them match 0/1.
"""

PAYLOAD_SCHEMAS = {
    models.PayloadSchemaType.KEYWORD: edge.PayloadSchemaType.Keyword,
    models.PayloadSchemaType.INTEGER: edge.PayloadSchemaType.Integer,
    models.PayloadSchemaType.FLOAT: edge.PayloadSchemaType.Float,
    models.PayloadSchemaType.BOOL: edge.PayloadSchemaType.Integer,  # stored as 0/1: BOOL_KEYS
    models.PayloadSchemaType.DATETIME: edge.PayloadSchemaType.Datetime,
}

QDRANT_DEFAULT_RRF_K = 2
"""The constant Qdrant's `FusionQuery(RRF)` uses when none is given (the server's default)."""


def to_filter(selector: models.Filter) -> edge.Filter:
    return edge.Filter(
        must=_conditions(selector.must),
        should=_conditions(selector.should),
        must_not=_conditions(selector.must_not),
    )


def _optional_filter(selector: models.Filter | None) -> edge.Filter | None:
    return None if selector is None else to_filter(selector)


def _conditions(conditions: Any) -> list[Any] | None:
    if conditions is None:
        return None
    if not isinstance(conditions, list):
        conditions = [conditions]
    return [_condition(condition) for condition in conditions]


def _condition(condition: Any) -> Any:
    if isinstance(condition, models.Filter):
        return to_filter(condition)
    if isinstance(condition, models.IsEmptyCondition):
        return edge.IsEmptyCondition(key=condition.is_empty.key)
    if not isinstance(condition, models.FieldCondition):
        raise TypeError(f"no Edge translation for the condition {condition!r}")
    if condition.range is not None:
        return _range(condition.key, condition.range)
    match = condition.match
    if isinstance(match, models.MatchValue):
        value = int(match.value) if isinstance(match.value, bool) else match.value  # BOOL_KEYS
        return edge.FieldCondition(key=condition.key, match=edge.MatchValue(value))
    if isinstance(match, models.MatchAny):
        any_of = cast("list[str] | list[int]", list(match.any))
        return edge.FieldCondition(key=condition.key, match=edge.MatchAny(any_of))
    raise TypeError(f"no Edge translation for the match {match!r}")


def _range(key: str, bounds: Any) -> Any:
    if isinstance(bounds, models.DatetimeRange):
        as_text = {op: _rfc3339(getattr(bounds, op)) for op in ("gte", "gt", "lte", "lt")}
        return edge.FieldCondition(key=key, range=edge.RangeDateTime(**as_text))
    if not isinstance(bounds, models.Range):
        raise TypeError(f"no Edge translation for the range {bounds!r}")
    numeric = edge.FieldCondition(
        key=key, range=edge.RangeFloat(gte=bounds.gte, gt=bounds.gt, lte=bounds.lte, lt=bounds.lt)
    )
    name = _metadata_key(key)
    if name is None or not (_within(0, bounds) or _within(1, bounds)):
        return numeric
    # Booleans are stored as 0/1 here (BOOL_KEYS), and a range holding 0 or 1 must not match
    # them, as it does not on the server: exclude the points whose value of this key was a
    # boolean. Only then: the exclusion reads each candidate's payload, which made a range
    # filter ~40 times slower at 100,000 chunks (BENCHMARKS.md, "Filters at 100,000 chunks").
    return edge.Filter(
        must=[numeric], must_not=[edge.FieldCondition(key=BOOL_KEYS, match=edge.MatchValue(name))]
    )


def _within(value: float, bounds: models.Range) -> bool:
    return (
        (bounds.gte is None or value >= bounds.gte)
        and (bounds.gt is None or value > bounds.gt)
        and (bounds.lte is None or value <= bounds.lte)
        and (bounds.lt is None or value < bounds.lt)
    )


def _metadata_key(path: str) -> str | None:
    """The user metadata key a payload path names (`metadata.k` or `metadata."k.x"`)."""
    if not path.startswith("metadata."):
        return None
    key = path.removeprefix("metadata.")
    return key[1:-1] if key.startswith('"') and key.endswith('"') else key


def _rfc3339(moment: Any) -> str | None:
    """A bound as the RFC 3339 text Edge parses (qdrant-client may hold a `datetime`)."""
    if moment is None or isinstance(moment, str):
        return moment
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return str(moment.astimezone(UTC).isoformat().replace("+00:00", "Z"))


def _vector(vector: Any) -> Any:
    if isinstance(vector, models.SparseVector):
        return edge.SparseVector(indices=list(vector.indices), values=list(vector.values))
    if isinstance(vector, list):
        return vector
    raise TypeError(f"no Edge translation for the vector {type(vector).__name__}")


def to_point(point: Point) -> edge.Point:
    # A list, not the array: the binding reads an ndarray element by element through numpy
    # scalars, which took longer than `tolist()` and reading the list (BENCHMARKS.md,
    # "Embedded store", the writes).
    vectors: dict[str, Any] = {DENSE: point.dense.astype(np.float32, copy=False).tolist()}
    if point.sparse.indices:
        vectors[KEYWORD] = edge.SparseVector(
            indices=point.sparse.indices, values=point.sparse.values
        )
    return edge.Point(id=point.id, vector=vectors, payload=_stored_payload(point.payload))


def _stored_payload(payload: dict[str, Any] | None) -> dict[str, Any] | None:
    metadata = (payload or {}).get("metadata")
    if not payload or not isinstance(metadata, dict):
        return payload
    flags = sorted(key for key, value in metadata.items() if isinstance(value, bool))
    if not flags:
        return payload
    as_ints = {key: int(value) if key in flags else value for key, value in metadata.items()}
    return {**payload, "metadata": as_ints, BOOL_KEYS: flags}


def read_payload(payload: dict[str, Any] | None) -> dict[str, Any] | None:
    """Return a stored payload as it was written (booleans back in `metadata`)."""
    if not payload or BOOL_KEYS not in payload:
        return payload
    flags = payload.pop(BOOL_KEYS)
    metadata = payload.get("metadata")
    if isinstance(metadata, dict):
        for key in flags:
            if key in metadata:
                metadata[key] = bool(metadata[key])
    return payload


def nearest(query: Any, using: str | None) -> edge.Query:
    return edge.Query.Nearest(_vector(query), using=using)


DENSE_SEARCH = edge.SearchParams(
    quantization=edge.QuantizationSearchParams(rescore=True, oversampling=2.0)
)
"""How every dense search reads an indexed segment: HNSW over the int8 copies
(`docingest.pipeline.store.edge.DENSE_QUANTIZATION`) picks twice the candidates asked for, and the
float32 originals rescore them, so scores are exact cosines. Edge does not rescore by default:
without it, scores are the int8 approximations (BENCHMARKS.md, "Embedded store")."""


def _search_params(using: str | None) -> edge.SearchParams | None:
    return DENSE_SEARCH if using == DENSE else None


def to_query(request: models.QueryRequest) -> edge.QueryRequest:
    if request.prefetch is not None or request.offset:
        raise TypeError("no Edge translation for prefetch or offset in a batch query")
    return edge.QueryRequest(
        limit=request.limit or 10,
        query=nearest(request.query, request.using),
        filter=_optional_filter(request.filter),
        with_payload=_payload_keys(request.with_payload),
        score_threshold=request.score_threshold,
        params=_search_params(request.using),
    )


def to_prefetch(prefetch: models.Prefetch) -> edge.Prefetch:
    return edge.Prefetch(
        limit=prefetch.limit or 10,
        query=nearest(prefetch.query, prefetch.using),
        filter=_optional_filter(prefetch.filter),
        params=_search_params(prefetch.using),
    )


def to_fusion(query: models.FusionQuery | models.RrfQuery) -> Any:
    if isinstance(query, models.RrfQuery):
        return edge.Fusion.Rrf(k=query.rrf.k if query.rrf.k is not None else QDRANT_DEFAULT_RRF_K)
    if query.fusion == models.Fusion.RRF:
        return edge.Fusion.Rrf(k=QDRANT_DEFAULT_RRF_K)
    raise TypeError(f"no Edge translation for the fusion {query!r}")


def _payload_keys(with_payload: Any) -> Any:
    if with_payload is None or isinstance(with_payload, bool):
        return with_payload
    if isinstance(with_payload, list):
        return payload_keys(with_payload)
    raise TypeError(f"no Edge translation for with_payload={with_payload!r}")


def payload_keys(keys: Sequence[str]) -> list[str]:
    """Return the payload keys to read for `keys` (with BOOL_KEYS beside `metadata`)."""
    return [*keys, BOOL_KEYS] if "metadata" in keys else list(keys)


def vectors_from(vector: Any) -> dict[str, Any] | None:
    """Return a record's named vectors as qdrant-client gives them (sparse as its model)."""
    if not isinstance(vector, dict):
        return None
    out: dict[str, Any] = {}
    for name, value in vector.items():
        if isinstance(value, edge.SparseVector):
            out[name] = models.SparseVector(indices=list(value.indices), values=list(value.values))
        else:
            out[name] = value
    return out


def to_record(record: edge.Record) -> models.Record:
    return models.Record(
        id=str(record.id), payload=read_payload(record.payload), vector=vectors_from(record.vector)
    )


def to_scored(points: Sequence[edge.ScoredPoint]) -> list[models.ScoredPoint]:
    return [
        models.ScoredPoint(
            id=str(p.id), version=0, score=float(p.score), payload=read_payload(p.payload)
        )
        for p in points
    ]
