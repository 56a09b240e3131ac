"""CSV and TSV: the dialect sniffed, the encoding as for plain text, rows as named lines.

Each row after the header becomes `Header: value; Header: value` (see `records`), so a chunk
from deep in a long file still says what its numbers are.
"""

from __future__ import annotations

import csv
import io

from docingest.pipeline.detect.sniff import csv_dialect
from docingest.pipeline.document import DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import CorruptDocument
from docingest.pipeline.extract.records import RowRenderer
from docingest.pipeline.extract.text import decode_document

_DIALECT_NAMES = {",": "comma", ";": "semicolon", "\t": "tab"}


def extract_csv(data: bytes, *, encoding: str | None, max_chars: int) -> ExtractedDocument:
    """Extract a delimited text file as a TABLE of named rows."""
    text, used = decode_document(data, encoding=encoding)
    dialect: type[csv.Dialect] = csv_dialect(text, min_rows=1) or csv.excel
    renderer = RowRenderer(max_chars=max_chars)
    # The csv module refuses fields over 128 KiB by default (a process-wide setting); no field
    # can be longer than the text, and the text is bounded by the upload limit.
    if csv.field_size_limit() < len(text):
        csv.field_size_limit(len(text))
    try:
        for row in csv.reader(io.StringIO(text, newline=""), dialect):
            renderer.add(row)
    except csv.Error as exc:
        raise CorruptDocument(f"The CSV file cannot be read as records: {exc}.") from exc
    blocks = renderer.finish()
    delimiter = _DIALECT_NAMES.get(dialect.delimiter, repr(dialect.delimiter))
    return ExtractedDocument(
        format=DocumentFormat.CSV,
        blocks=blocks,
        extra={"encoding": used, "delimiter": delimiter, "rows": renderer.rows},
    )
