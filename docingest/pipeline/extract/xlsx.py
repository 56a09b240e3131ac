"""XLSX: each visible sheet a section headed by its name, its rows as named lines.

openpyxl reads the workbook in read-only mode, which parses each sheet's XML as a stream
instead of building every cell object, and with `data_only=True`, which gives formulas'
cached values (what the spreadsheet last showed) rather than their source. It is handed the
package re-packed uncompressed by the shared pre-scan (`zip_container`): it reads some parts
with `ZipFile.read`, which inflates a member in one call whatever its declared size.

A sheet's declared dimension (`<dimension ref="A1:XFD1048576"/>`) is ignored: openpyxl would
pad every row to it and yield every missing row up to it, so a small file declaring the
whole grid would cost 17 billion empty cells. Only the cells a sheet really holds are read.
Hidden and very hidden sheets are skipped and listed in `extra["hidden_sheets"]`.
"""

from __future__ import annotations

import io
import warnings
import zipfile
from datetime import UTC, datetime
from typing import Any

import openpyxl
from openpyxl.utils.exceptions import InvalidFileException

from docingest.pipeline.document import Block, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import CorruptDocument
from docingest.pipeline.extract.records import RowRenderer, sheet_section
from docingest.pipeline.extract.zip_container import ZipLimits, repack_office

_WORKBOOK = "xl/workbook.xml"


def extract_xlsx(data: bytes, *, limits: ZipLimits, max_chars: int) -> ExtractedDocument:
    """Extract the visible sheets of the XLSX in `data`, with the core properties."""
    package = repack_office(data, label="XLSX", limits=limits, main_part=_WORKBOOK)
    try:
        with warnings.catch_warnings():
            # openpyxl warns about every extension it drops (data validation, conditional
            # formatting): presentation, not text.
            warnings.simplefilter("ignore")
            workbook = openpyxl.load_workbook(
                io.BytesIO(package.repacked), read_only=True, data_only=True, keep_links=False
            )
            try:
                return _extract(workbook, has_core=package.has_core_properties, max_chars=max_chars)
            finally:
                workbook.close()
    except (InvalidFileException, zipfile.BadZipFile, KeyError, ValueError, TypeError) as exc:
        raise CorruptDocument(f"The XLSX workbook is damaged and cannot be read ({exc}).") from exc


def _extract(workbook: Any, *, has_core: bool, max_chars: int) -> ExtractedDocument:
    blocks: list[Block] = []
    hidden: list[str] = []
    rows = 0
    for sheet in workbook.worksheets:
        if sheet.sheet_state != "visible":
            hidden.append(sheet.title)
            continue
        sheet.reset_dimensions()  # read the cells it holds, not the grid it declares
        renderer = RowRenderer(max_chars=max_chars, chars_so_far=_chars(blocks))
        for values in sheet.iter_rows(values_only=True):
            renderer.add(values)
        title = " ".join(sheet.title.split())
        blocks.extend(sheet_section(title, renderer.finish()))
        rows += renderer.rows
    extra: dict[str, Any] = {"sheets": len(workbook.worksheets), "rows": rows}
    if hidden:
        extra["hidden_sheets"] = hidden
    document = ExtractedDocument(format=DocumentFormat.XLSX, blocks=blocks, extra=extra)
    if has_core:  # without the part openpyxl invents one (creator "openpyxl", created now)
        properties = workbook.properties
        document.title = _one_line(properties.title)
        document.author = _one_line(properties.creator)
        document.created = _utc(properties.created)
        document.modified = _utc(properties.modified)
    return document


def _chars(blocks: list[Block]) -> int:
    return sum(len(block.text) + 2 for block in blocks)


def _one_line(value: object) -> str | None:
    return " ".join(str(value).split()) or None if value else None


def _utc(value: object) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
