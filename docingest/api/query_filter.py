"""A filter sent in a query string (`?filter=` of a GET search, a documents listing or a
delete by filter): JSON text, read as a search's `filter` object is; too long, not JSON or not
an object is 400 `invalid_filter`."""

from __future__ import annotations

import json
from typing import Any

from docingest.pipeline.errors import InvalidFilter

MAX_FILTER_CHARS = 16_384

FILTER_HELP = (
    'A JSON object of conditions, as a search\'s `filter`: {"department": "legal"}; '
    "document_id, ingested_at and metadata keys."
)


def filter_param(raw: str | None) -> dict[str, Any] | None:
    """The filter object of `raw`, or None when the parameter is left out."""
    if raw is None:
        return None
    if len(raw) > MAX_FILTER_CHARS:
        raise InvalidFilter(f"The filter is longer than {MAX_FILTER_CHARS} characters.")
    try:
        parsed = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InvalidFilter(
            'The filter is not valid JSON; send an object such as {"department": "legal"}.'
        ) from exc
    if not isinstance(parsed, dict):  # JSON null too: no filter is sent by leaving it out
        raise InvalidFilter('A filter must be a JSON object, such as {"department": "legal"}.')
    return parsed
