"""The store's Qdrant filters (qdrant-client's models, the subset
`docingest.pipeline.store.requests` and `filter_qdrant` build) compiled to a SQL condition on a
chunk table's `payload` (jsonb), with Qdrant's semantics, so every engine selects the same
points (tests/pipeline/store/test_filters.py runs the generated filters on all three):

- a match on a field that holds a list matches any of its elements, as Qdrant's does: a value
  is tested with jsonb containment of `{path: value}` or `{path: [value]}` (the table's GIN
  index on `payload` serves both);
- a range holds for numbers only (a boolean or string never falls in one), and for any
  element of a list; a datetime range compares values parsed as RFC 3339 (`rfc3339()`, a
  function of the schema; `docingest.pipeline.store.postgres_schema`), in UTC;
- `is_empty` is a missing field, null or an empty list;
- `must_not` holds when none of its conditions does, so a point without the field passes.

The store's own `state` and `document_id` are also columns, generated from the payload by
the server (`docingest.pipeline.store.postgres_schema`): an equality on them is compiled to
the column, whose statistics the planner reads (a jsonb containment it estimates at 0.1 % of
the rows whatever they hold), so a dense search walks the HNSW graph instead of sorting
every live row. Only string values go to the column (`->>` would make the number 5 equal
"5"), others to the payload as before.

Nothing of a filter is concatenated into SQL: every value and every payload path is a bound
parameter (a path is a `text[]` for `#>`), and the only identifier, the schema of `rfc3339()`,
is quoted by `psycopg.sql.Identifier`. The SQL text itself comes from the constants below.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb
from qdrant_client import models

Params = list[Any]

_TRUE = sql.SQL("TRUE")
_COLUMNS = {"state": sql.SQL("state"), "document_id": sql.SQL("document_id")}
"""Payload keys the store writes as strings, kept in generated columns of the same name."""
_RANGE_OPS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_NUMBER_PATHS = {
    frozenset(ops): "lax $[*] ? (@.type() == \"number\""
    + "".join(f" && @ {_RANGE_OPS[op]} ${op}" for op in sorted(ops))
    + ")"
    for ops in (
        {"gt"}, {"gte"}, {"lt"}, {"lte"}, {"gt", "lt"}, {"gt", "lte"}, {"gte", "lt"},
        {"gte", "lte"},
    )
}  # fmt: skip
"""The jsonpath of each combination of range bounds (constants; the bounds are its `vars`)."""


def without_nul(value: Any) -> Any:
    """`value` with every U+0000 removed from its strings (keys too): PostgreSQL's text and
    jsonb cannot hold that character, so the Postgres store drops it from what it stores and,
    alike, from filter values, which then match what was stored (RELIABILITY.md)."""
    if isinstance(value, str):
        return value.replace("\x00", "") if "\x00" in value else value
    if isinstance(value, dict):
        return {without_nul(key): without_nul(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [without_nul(item) for item in value]
    return value


def stored(value: Any) -> Jsonb:
    """`value` as a jsonb parameter, without U+0000 (`without_nul`)."""
    return Jsonb(without_nul(value))


def payload_path(key: str) -> list[str]:
    """The keys of a Qdrant payload path: `metadata.year` → ["metadata", "year"], and
    `metadata."a.b"` (a key holding a dot, `docingest.pipeline.store.filters.metadata_path`)
    → ["metadata", "a.b"]."""
    parts: list[str] = []
    rest = key
    while rest:
        if rest.startswith('"'):  # ends at a quote that ends the path or precedes a dot
            end = next(
                (
                    i
                    for i in range(1, len(rest))
                    if rest[i] == '"' and rest[i + 1 : i + 2] in ("", ".")
                ),
                len(rest),
            )
            parts.append(rest[1:end])
            rest = rest[end + 1 :].removeprefix(".")
        else:
            head, _, rest = rest.partition(".")
            parts.append(head)
    return parts


def nested(path: Sequence[str], value: Any) -> dict[str, Any]:
    """`{path[0]: {path[1]: ... value}}`: the document a containment test looks for."""
    document: Any = value
    for key in reversed(path):
        document = {key: document}
    return dict(document)


class FilterCompiler:
    """Compiles filters for one schema (where `rfc3339()` lives)."""

    def __init__(self, schema: str) -> None:
        self._rfc3339 = sql.SQL("{}.rfc3339").format(sql.Identifier(schema))

    def compile(self, selector: models.Filter | None, params: Params) -> sql.Composable:
        """The SQL condition of `selector`, appending its parameters to `params`."""
        if selector is None:
            return _TRUE
        parts: list[sql.Composable] = []
        for condition in _listed(selector.must):
            parts.append(self._condition(condition, params))
        should = [self._condition(condition, params) for condition in _listed(selector.should)]
        if should:
            parts.append(_joined(should, "OR"))
        for condition in _listed(selector.must_not):
            parts.append(sql.SQL("NOT {}").format(self._condition(condition, params)))
        return _joined(parts, "AND") if parts else _TRUE

    def _condition(self, condition: Any, params: Params) -> sql.Composable:
        if isinstance(condition, models.Filter):
            return self.compile(condition, params)
        if isinstance(condition, models.IsEmptyCondition):
            params.append(without_nul(payload_path(condition.is_empty.key)))
            return sql.SQL(
                "(coalesce(payload #> %s, 'null'::jsonb) IN ('null'::jsonb, '[]'::jsonb))"
            )
        if not isinstance(condition, models.FieldCondition):
            raise TypeError(f"no SQL translation for the condition {condition!r}")
        path = without_nul(payload_path(condition.key))
        if condition.range is not None:
            return self._range(path, condition.range, params)
        match = condition.match
        if isinstance(match, models.MatchValue):
            return _any_of(path, [match.value], params)
        if isinstance(match, models.MatchAny):
            return _any_of(path, list(match.any), params)
        raise TypeError(f"no SQL translation for the match {match!r}")

    def _range(
        self, path: list[str], bounds: models.Range | models.DatetimeRange, params: Params
    ) -> sql.Composable:
        given = {op: getattr(bounds, op) for op in _RANGE_OPS if getattr(bounds, op) is not None}
        if not given:
            return _TRUE
        if isinstance(bounds, models.DatetimeRange):
            params.extend([path, path, path])  # in the order of the placeholders
            tests = []
            for op, bound in given.items():
                params.append(_utc(bound))
                tests.append(sql.SQL("{}(element) {} %s").format(
                    self._rfc3339, sql.SQL(_RANGE_OPS[op])
                ))  # fmt: skip
            return sql.SQL(
                "EXISTS (SELECT FROM jsonb_array_elements(CASE jsonb_typeof(payload #> %s) "
                "WHEN 'array' THEN payload #> %s ELSE jsonb_build_array(payload #> %s) END) "
                "AS element WHERE {})"
            ).format(_joined(tests, "AND"))
        params.extend([path, _NUMBER_PATHS[frozenset(given)], Jsonb(given)])
        return sql.SQL("coalesce(jsonb_path_exists(payload #> %s, %s::jsonpath, %s), FALSE)")


def _any_of(path: list[str], values: Sequence[Any], params: Params) -> sql.Composable:
    """The field equals one of `values`, or holds a list with one of them."""
    column = _COLUMNS.get(path[0]) if len(path) == 1 else None
    if column is not None and values and all(isinstance(value, str) for value in values):
        # NULL-safe, so that NOT of it holds for a point without the field, as Qdrant's
        if len(values) == 1:
            params.append(without_nul(values[0]))
            test = "({column} IS NOT NULL AND {column} = %s::text)"
        else:
            params.append([without_nul(value) for value in values])
            test = "({column} IS NOT NULL AND {column} = ANY(%s::text[]))"
        return sql.SQL(test).format(column=column)
    documents = []
    for value in values:
        documents.append(stored(nested(path, value)))
        documents.append(stored(nested(path, [value])))
    params.append(documents)
    return sql.SQL("(payload @> ANY(%s::jsonb[]))")


def _listed(conditions: Any) -> list[Any]:
    if conditions is None:
        return []
    return list(conditions) if isinstance(conditions, list) else [conditions]


def _joined(parts: Sequence[sql.Composable], operator: str) -> sql.Composable:
    if len(parts) == 1:
        return parts[0]
    return sql.SQL("(") + sql.SQL(f" {operator} ").join(parts) + sql.SQL(")")


def _utc(moment: datetime | date) -> datetime:
    if not isinstance(moment, datetime):
        return datetime(moment.year, moment.month, moment.day, tzinfo=UTC)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
