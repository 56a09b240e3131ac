"""A validated `SearchFilter` as a Qdrant filter (qdrant-client's models; the Edge engine
translates them in `docingest.pipeline.store.edge_convert`).

Both engines then give the same answers (tests/pipeline/store/test_filter_congruence.py):
`ne`, `nin` and `$not` are `must_not`, so a chunk without the field matches them; `exists` is
the negation of Qdrant's `is_empty` (missing, null or an empty list); equality on a float or a
datetime is a closed range, since Qdrant matches only strings, integers and booleans exactly.
"""

from __future__ import annotations

from typing import Any, cast

from qdrant_client import models

from docingest.pipeline.store.filters import Condition, Node, SearchFilter


def filter_conditions(search_filter: SearchFilter) -> list[models.Condition]:
    """The root group's children as `must` conditions."""
    return [_node(child) for child in search_filter.root.children]


def _node(node: Node) -> models.Condition:
    if isinstance(node, Condition):
        return _condition(node)
    children = [_node(child) for child in node.children]
    if node.op == "and":
        return models.Filter(must=children)
    if node.op == "or":
        return models.Filter(should=children)
    return models.Filter(must_not=[models.Filter(must=children)])


def _condition(condition: Condition) -> models.Condition:
    path, value = condition.path, condition.value
    if condition.op == "eq":
        return _equals(path, value, condition.kind)
    if condition.op == "ne":
        return models.Filter(must_not=[_equals(path, value, condition.kind)])
    if condition.op == "in":
        return _any_of(path, value, condition.kind)
    if condition.op == "nin":
        return models.Filter(must_not=[_any_of(path, value, condition.kind)])
    if condition.op == "all":
        return models.Filter(must=[_equals(path, item, condition.kind) for item in value])
    if condition.op == "exists":
        empty = models.IsEmptyCondition(is_empty=models.PayloadField(key=path))
        return models.Filter(must_not=[empty]) if value else empty
    if condition.kind == "datetime":
        return models.FieldCondition(key=path, range=models.DatetimeRange(**value))
    return models.FieldCondition(key=path, range=models.Range(**value))


def _equals(path: str, value: Any, kind: str | None) -> models.Condition:
    if kind == "datetime":
        return models.FieldCondition(key=path, range=models.DatetimeRange(gte=value, lte=value))
    if isinstance(value, float) or kind == "float":  # MatchValue takes str, int and bool only
        return models.FieldCondition(key=path, range=models.Range(gte=value, lte=value))
    return models.FieldCondition(key=path, match=models.MatchValue(value=value))


def _any_of(path: str, values: tuple[Any, ...], kind: str | None) -> models.Condition:
    exact = all(isinstance(v, str) for v in values) or all(
        isinstance(v, int) and not isinstance(v, bool) for v in values
    )
    if exact and kind not in ("float", "datetime"):
        any_of = cast("list[str] | list[int]", list(values))
        return models.FieldCondition(key=path, match=models.MatchAny(any=any_of))
    return models.Filter(should=[_equals(path, value, kind) for value in values])
