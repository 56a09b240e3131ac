"""Search filters, validated from a request's `filter` object into a small tree.

A filter is a JSON object whose entries must all hold. Per field (the HTTP API v1.2, "Search
request"):

- a scalar means equality (against a list-valued field: any element equals it), a list means
  any-of, as in v1;
- an operator object `{"gte", "gt", "lte", "lt", "in", "nin", "ne", "all", "exists"}` holds
  each operator given: ranges on numbers or RFC 3339 datetimes, `ne`/`nin` (a chunk without
  the field matches them), `all` (a list field holds every value), `exists` (a non-empty value);
- groups `{"$and": [filter, ...]}`, `{"$or": [filter, ...]}`, `{"$not": filter}` nest.

`document_id` and `ingested_at` are the point's own fields; every other key names a user
metadata key, stored under `metadata`. A field declared in the index's `metadata_schema`
takes values of its type only; an undeclared one takes what its values say (a range of
strings is a range of datetimes). Everything wrong is `InvalidFilter` naming the field, and
sizes are bounded so a filter cannot make Qdrant's work unbounded.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from docingest.pipeline.errors import InvalidFilter
from docingest.pipeline.metadata import INT64, LONE_SURROGATE, METADATA_KEY, is_text
from docingest.pipeline.store.schema import DATETIME_FORM, FieldType, parse_datetime

TOP_LEVEL_KEYS: dict[str, FieldType] = {"document_id": "keyword", "ingested_at": "datetime"}
"""Filter keys that address the point payload itself, and their types."""

MAX_CONDITIONS = 64
"""Field conditions in one filter, across all its groups (v1 allowed 32 keys)."""
MAX_DEPTH = 4
"""Groups nested in groups, at most."""
MAX_ANY_OF = 1000
"""Values in one `in`, `nin`, `all` or any-of list."""
MAX_VALUES = 4000
"""Values in one filter's lists together."""
RANGE_OPS = ("gte", "gt", "lte", "lt")
OPERATORS = (*RANGE_OPS, "in", "nin", "ne", "all", "exists")
GROUPS = ("$and", "$or", "$not")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")

Scalar = str | int | float | bool
Op = Literal["eq", "in", "nin", "ne", "all", "exists", "range"]
Kind = Literal["keyword", "integer", "float", "boolean", "datetime", "number"]
"""How a condition's values compare: "number" is an undeclared field's int-or-float."""


@dataclass(frozen=True, slots=True)
class Condition:
    """One test of one field. `value` is a scalar (eq, ne), a tuple (in, nin, all), a bool
    (exists) or a mapping of range bounds (range); datetimes are normalised RFC 3339 UTC."""

    field: str
    path: str
    op: Op
    value: Any
    kind: Kind | None


@dataclass(frozen=True, slots=True)
class Group:
    """`and`: all children hold; `or`: at least one does; `not`: not all of them do."""

    op: Literal["and", "or", "not"]
    children: tuple[Condition | Group, ...]


Node = Condition | Group


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """A validated filter: its root is an `and` group."""

    root: Group

    @classmethod
    def parse(
        cls, raw: Mapping[str, Any] | None, *, schema: Mapping[str, FieldType] | None = None
    ) -> SearchFilter | None:
        """Validate a request's filter object against the index's `metadata_schema`; raise
        `InvalidFilter` saying what is wrong. An empty object is no filter (None)."""
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            raise InvalidFilter('A filter must be a JSON object, such as {"department": "legal"}.')
        parser = _Parser(schema or {})
        root = parser.group("and", raw, depth=0)
        return cls(root) if root.children else None

    def fields(self) -> set[str]:
        """The fields the filter names (for choosing payload indexes, and for messages)."""
        found: set[str] = set()
        stack: list[Node] = [self.root]
        while stack:
            node = stack.pop()
            if isinstance(node, Condition):
                found.add(node.field)
            else:
                stack.extend(node.children)
        return found


def metadata_path(key: str) -> str:
    """Return the payload path of a user metadata key (quoted when it holds a '.')."""
    return f"metadata.{key}" if _PLAIN_KEY.fullmatch(key) else f'metadata."{key}"'


class _Parser:
    def __init__(self, schema: Mapping[str, FieldType]) -> None:
        self.schema = schema
        self.conditions = 0
        self.values = 0

    def group(self, op: Literal["and", "or", "not"], raw: Any, *, depth: int) -> Group:
        if depth > MAX_DEPTH:
            raise InvalidFilter(f"A filter may nest groups ($and, $or, $not) {MAX_DEPTH} deep.")
        if not isinstance(raw, Mapping):
            raise InvalidFilter(
                f"Each filter in a group must be a JSON object, not {type(raw).__name__}."
            )
        children: list[Node] = []
        for key, value in raw.items():
            if not isinstance(key, str):
                raise InvalidFilter(f"Filter key {key!r} is invalid.")
            if key.startswith("$"):
                children.append(self._group_entry(key, value, depth=depth))
            else:
                children.extend(self._field(key, value))
        if op != "and" and not children:
            raise InvalidFilter("A filter group may not be empty.")
        return Group(op, tuple(children))

    def _group_entry(self, key: str, value: Any, *, depth: int) -> Group:
        if key == "$not":
            if not isinstance(value, Mapping) or not value:
                raise InvalidFilter('"$not" takes one non-empty filter object.')
            return self.group("not", value, depth=depth + 1)
        if key not in GROUPS:
            raise InvalidFilter(
                f"Unknown filter group {key!r}; groups are {', '.join(GROUPS)} (operators "
                'such as "gte" go inside a field\'s object: {"year": {"gte": 2020}}).'
            )
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_CONDITIONS:
            raise InvalidFilter(f'"{key}" takes a list of 1 to {MAX_CONDITIONS} filter objects.')
        members = tuple(self.group("and", member, depth=depth + 1) for member in value)
        for member in members:
            if not member.children:
                raise InvalidFilter(f'A filter in "{key}" may not be empty.')
        return Group("and" if key == "$and" else "or", members)

    def _field(self, key: str, value: Any) -> list[Condition]:
        if not METADATA_KEY.fullmatch(key):
            raise InvalidFilter(
                f"Filter key {key!r} is invalid: metadata keys are 1-64 letters, digits, "
                "'_', '-' or '.', starting with a letter."
            )
        declared = TOP_LEVEL_KEYS.get(key) or self.schema.get(key)
        field = _Field(key, key if key in TOP_LEVEL_KEYS else metadata_path(key), declared)
        if isinstance(value, Mapping):
            conditions = self._operators(field, value)
        elif isinstance(value, list | tuple):
            conditions = [field.listed("in", value, self)]
        else:
            conditions = [field.scalar("eq", value)]
        self.conditions += len(conditions)
        if self.conditions > MAX_CONDITIONS:
            raise InvalidFilter(f"A filter may hold at most {MAX_CONDITIONS} conditions.")
        return conditions

    def _operators(self, field: _Field, ops: Mapping[str, Any]) -> list[Condition]:
        if not ops:
            raise InvalidFilter(f"Filter on '{field.name}': the operator object is empty.")
        unknown = [op for op in ops if op not in OPERATORS]
        if unknown:
            raise InvalidFilter(
                f"Filter on '{field.name}': unknown operator {unknown[0]!r}; operators are "
                f"{', '.join(OPERATORS)}."
            )
        conditions = []
        bounds = {op: ops[op] for op in RANGE_OPS if op in ops}
        if bounds:
            conditions.append(field.range(bounds))
        for op in ("in", "nin", "all"):
            if op in ops:
                conditions.append(field.listed(op, ops[op], self))
        if "ne" in ops:
            conditions.append(field.scalar("ne", ops["ne"]))
        if "exists" in ops:
            if not isinstance(ops["exists"], bool):
                raise InvalidFilter(f"Filter on '{field.name}': \"exists\" takes true or false.")
            conditions.append(Condition(field.name, field.path, "exists", ops["exists"], None))
        return conditions


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    path: str
    declared: FieldType | None

    def fail(self, problem: str) -> InvalidFilter:
        typed = f" (declared {self.declared})" if self.declared else ""
        return InvalidFilter(f"Filter on '{self.name}'{typed}: {problem}")

    def scalar(self, op: Op, value: Any) -> Condition:
        checked, kind = self._value(value)
        return Condition(self.name, self.path, op, checked, kind)

    def listed(self, op: Op, values: Any, parser: _Parser) -> Condition:
        if not isinstance(values, list | tuple) or not 1 <= len(values) <= MAX_ANY_OF:
            raise self.fail(f'"{op}" takes a list of 1 to {MAX_ANY_OF} values.')
        parser.values += len(values)
        if parser.values > MAX_VALUES:
            raise InvalidFilter(f"A filter may list at most {MAX_VALUES} values in all.")
        checked = [self._value(item) for item in values]
        kinds = {kind for _, kind in checked}
        if kinds == {"integer", "float"}:
            kinds = {"number"}
        if len(kinds) > 1:
            raise self.fail(f'the values of "{op}" must all be of one type.')
        kind = kinds.pop()
        if kind == "boolean":
            raise self.fail(f'"{op}" takes strings or numbers; for booleans use a value or "ne".')
        if op == "all" and kind in ("float", "number", "datetime"):
            raise self.fail('"all" takes strings, integers or booleans.')
        return Condition(self.name, self.path, op, tuple(value for value, _ in checked), kind)

    def _value(self, value: Any) -> tuple[Scalar, Kind]:
        if isinstance(value, str) and not is_text(value):
            raise self.fail(f"the value {LONE_SURROGATE}.")
        declared = self.declared
        if declared in ("keyword", "keyword[]", "text"):
            if not isinstance(value, str):
                raise self.fail(f"expected a string, not {_type_name(value)}.")
            return value, "keyword"
        if declared == "datetime":
            return self._datetime(value), "datetime"
        if declared == "boolean":
            if not isinstance(value, bool):
                raise self.fail(f"expected true or false, not {_type_name(value)}.")
            return value, "boolean"
        if declared == "integer":
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.fail(f"expected an integer, not {_type_name(value)}.")
            return self._int(value), "integer"
        if declared == "float":
            return self._number(value), "float"
        # undeclared: the value says what it is
        if isinstance(value, bool):
            return value, "boolean"
        if isinstance(value, str):
            return value, "keyword"
        if isinstance(value, int):
            return self._int(value), "integer"
        if isinstance(value, float):
            return self._number(value), "float"
        raise self.fail(f"expected a string, number or boolean, not {_type_name(value)}.")

    def range(self, bounds: Mapping[str, Any]) -> Condition:
        declared = self.declared
        if declared in ("keyword", "keyword[]", "text", "boolean"):
            raise self.fail("ranges (gte, gt, lte, lt) take numbers or datetimes only.")
        strings = [isinstance(bound, str) for bound in bounds.values()]
        if declared == "datetime" or (declared is None and all(strings)):
            return Condition(
                self.name,
                self.path,
                "range",
                {op: self._datetime(bound) for op, bound in bounds.items()},
                "datetime",
            )
        if any(strings):
            raise self.fail("range bounds must be all numbers or all RFC 3339 datetimes.")
        checked = {op: self._number(bound) for op, bound in bounds.items()}
        kind: Kind = "integer" if declared == "integer" else "float" if declared else "number"
        return Condition(self.name, self.path, "range", checked, kind)

    def _number(self, value: Any) -> float | int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"expected a number, not {_type_name(value)}.")
        try:
            as_float = float(value)
        except OverflowError:
            raise self.fail("the number is too large.") from None
        if not math.isfinite(as_float):
            raise self.fail("expected a finite number.")
        return value

    def _int(self, value: int) -> int:
        if value not in INT64:
            raise self.fail(
                f"the integer is outside the 64-bit integer range ({INT64.start} to "
                f"{INT64.stop - 1}); "
                "metadata integers are stored in that range."
            )
        return value

    def _datetime(self, value: Any) -> str:
        if not isinstance(value, str):
            raise self.fail(f"expected an RFC 3339 datetime string, not {_type_name(value)}.")
        normalised = parse_datetime(value)
        if normalised is None:
            raise self.fail(f"{value[:40]!r} is not {DATETIME_FORM}.")
        return normalised


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", str: "a string", int: "an integer", float: "a number"}.get(
        type(value), type(value).__name__
    )
