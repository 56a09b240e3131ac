"""An index's `metadata_schema`: declared user metadata fields, their types and payload indexes.

A declared field is indexed for filtering on both engines, an upload whose metadata breaks
the schema is refused (`InvalidMetadata` naming the field), and filters on it take values of
its type only (`docingest.pipeline.store.filters`). Undeclared fields stay accepted and filterable.
Fields may be added to an index later; changing a declared field's type is a conflict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from qdrant_client import models

from docingest.pipeline.errors import IndexConflict, InvalidMetadata
from docingest.pipeline.metadata import INT64, METADATA_KEY, RESERVED_KEYS

FieldType = Literal["keyword", "keyword[]", "integer", "float", "boolean", "datetime", "text"]
MetadataSchema = dict[str, FieldType]
MAX_SCHEMA_FIELDS = 64

PAYLOAD_INDEX: dict[FieldType, models.PayloadSchemaType | None] = {
    "keyword": models.PayloadSchemaType.KEYWORD,
    "keyword[]": models.PayloadSchemaType.KEYWORD,
    "integer": models.PayloadSchemaType.INTEGER,
    "float": models.PayloadSchemaType.FLOAT,
    "boolean": models.PayloadSchemaType.BOOL,
    "datetime": models.PayloadSchemaType.DATETIME,
    "text": None,
}
"""The payload index of each type. `text` (long free text, matched exactly when filtered)
gets none: a keyword index of long strings costs memory for lookups nobody makes."""

# RFC 3339 date-time (a space for the "T" as its section 5.6 allows, seconds optional), or a
# full date alone: the forms both Qdrant engines parse (no offset means UTC, as there).
_DATETIME = re.compile(
    r"\d{4}-\d{2}-\d{2}"
    r"(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:\d{2})?)?"
)


DATETIME_FORM = (
    "an RFC 3339 datetime within years 0001-9999 once moved to UTC, such as "
    "2026-01-31T09:30:00Z or 2026-01-31"
)
"""What a datetime value must be, for messages."""


def parse_datetime(value: str) -> str | None:
    """Return `value` as a normalised RFC 3339 UTC string, or None if it is not a datetime
    or is one whose offset moves it out of years 1-9999 (which `datetime` cannot hold)."""
    if len(value) > 40 or not _DATETIME.fullmatch(value):
        return None
    text = value.replace(" ", "T").replace("z", "Z")
    head, dot, rest = text.partition(".")
    if dot:  # Python keeps microseconds; a longer fraction is cut, as Qdrant does
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{head}.{rest[: min(digits, 6)]}{rest[digits:]}"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:  # "9999-12-31T23:59:59-23:59" is in year 10000 in UTC
        return None
    spec = "microseconds" if moment.microsecond else "seconds"
    return moment.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def check_schema(raw: Mapping[str, Any]) -> MetadataSchema:
    """Validate a `metadata_schema` object; raise ValueError saying what is wrong."""
    if len(raw) > MAX_SCHEMA_FIELDS:
        raise ValueError(f"metadata_schema may declare at most {MAX_SCHEMA_FIELDS} fields")
    checked: MetadataSchema = {}
    for key, kind in raw.items():
        if not isinstance(key, str) or not METADATA_KEY.fullmatch(key):
            raise ValueError(
                f"metadata_schema field {key!r} is not a metadata key (1-64 letters, digits, "
                "'_', '-' or '.', starting with a letter)"
            )
        if key in RESERVED_KEYS:
            raise ValueError(f"metadata_schema field {key!r} is a reserved key")
        if kind not in PAYLOAD_INDEX:
            raise ValueError(
                f"metadata_schema field {key!r} has type {kind!r}; types are "
                f"{', '.join(PAYLOAD_INDEX)}"
            )
        checked[key] = kind
    return checked


def merge_schemas(
    index: str, have: Mapping[str, FieldType] | None, want: Mapping[str, FieldType] | None
) -> MetadataSchema | None:
    """The schema after asking for `want` on an index declaring `have`: fields may be added
    (a schema not given, or one leaving fields out, keeps them); a type change is a conflict."""
    if not want:
        return dict(have) if have else None
    merged = dict(have or {})
    for key, kind in want.items():
        old = merged.get(key)
        if old is not None and old != kind:
            raise IndexConflict(
                f"Index '{index}' declares metadata field '{key}' as {old}, not {kind}; a "
                "declared type cannot change (stored chunks were validated against it). "
                "Declare a new field, or delete the index."
            )
        merged[key] = kind
    return merged


def validate_metadata(metadata: Mapping[str, Any], schema: Mapping[str, FieldType] | None) -> None:
    """Raise `InvalidMetadata` naming the first field whose value breaks `schema`."""
    for key, kind in (schema or {}).items():
        if key in metadata:
            problem = _problem(kind, metadata[key])
            if problem:
                raise InvalidMetadata(
                    f"Metadata field '{key}' is declared {kind} in the index's metadata_schema: "
                    f"{problem}"
                )


def _problem(kind: FieldType, value: Any) -> str | None:
    if value is None:
        return None  # an absent value: filters treat it as missing
    if kind == "keyword[]":
        if isinstance(value, str):
            return None  # one value, as Qdrant matches a list's elements and a scalar alike
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return None
        return "expected a string or a list of strings."
    if kind in ("keyword", "text"):
        return None if isinstance(value, str) else "expected a string."
    if kind == "boolean":
        return None if isinstance(value, bool) else "expected true or false."
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return "expected an integer."
        return None if value in INT64 else "the integer is outside the 64-bit range."
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "expected a number."
        return None
    if isinstance(value, str) and parse_datetime(value) is not None:
        return None
    return f"expected {DATETIME_FORM}."
