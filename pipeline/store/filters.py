"""Search filters, validated from a request's `filter` object.

A filter is a JSON object of conditions that must all hold. A scalar value means equality
(against a list-valued field it matches when any element equals it); a list means any-of
(`{"tags": ["a", "b"]}` matches chunks whose `tags` holds "a" or "b"). `document_id` is the
point's own field; every other key names a user metadata key, stored under `metadata`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.errors import InvalidFilter
from pipeline.metadata import INT64

TOP_LEVEL_KEYS = frozenset({"document_id"})
"""Filter keys that address the point payload itself rather than user metadata."""

MAX_CONDITIONS = 32
MAX_ANY_OF = 100
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")  # the metadata key rule of pipeline/metadata
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")

Scalar = str | int | float | bool
FilterValue = Scalar | tuple[str, ...] | tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """Validated conditions: (payload path, value) pairs, all of which must hold."""

    conditions: tuple[tuple[str, FilterValue], ...]

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> SearchFilter | None:
        """Validate a request's filter object; raise `InvalidFilter` saying what is wrong."""
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            raise InvalidFilter('A filter must be a JSON object, such as {"department": "legal"}.')
        if len(raw) > MAX_CONDITIONS:
            raise InvalidFilter(f"A filter may hold at most {MAX_CONDITIONS} keys.")
        conditions = []
        for key, value in raw.items():
            if not isinstance(key, str) or not _KEY.fullmatch(key):
                raise InvalidFilter(
                    f"Filter key {key!r} is invalid: metadata keys are 1-64 letters, digits, "
                    "'_', '-' or '.', starting with a letter."
                )
            path = key if key in TOP_LEVEL_KEYS else metadata_path(key)
            conditions.append((path, _check_value(key, value)))
        return cls(tuple(conditions)) if conditions else None


def metadata_path(key: str) -> str:
    """Return the payload path of a user metadata key (quoted when it holds a '.')."""
    return f"metadata.{key}" if _PLAIN_KEY.fullmatch(key) else f'metadata."{key}"'


def _check_value(key: str, value: Any) -> FilterValue:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return _check_int(key, value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidFilter(f"Filter value of '{key}' must be a finite number.")
        return value
    if isinstance(value, list | tuple):
        if not value or len(value) > MAX_ANY_OF:
            raise InvalidFilter(
                f"Filter value of '{key}' must list 1 to {MAX_ANY_OF} accepted values."
            )
        if all(isinstance(item, str) for item in value):
            return tuple(value)
        if all(isinstance(item, int) and not isinstance(item, bool) for item in value):
            return tuple(_check_int(key, item) for item in value)
        raise InvalidFilter(
            f"Filter value of '{key}' must be a list of strings or a list of integers."
        )
    raise InvalidFilter(
        f"Filter value of '{key}' must be a string, number, boolean or list, "
        f"not {type(value).__name__}."
    )


def _check_int(key: str, value: int) -> int:
    if value not in INT64:
        raise InvalidFilter(
            f"Filter value of '{key}' is outside the 64-bit integer range "
            f"({INT64.start} to {INT64.stop - 1}); metadata integers are stored in that range."
        )
    return value
