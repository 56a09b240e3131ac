"""Legacy Excel `.xls` (BIFF8, Excel 97-2003): as XLSX, each visible sheet a section headed by
its name, its rows as named lines (`records.RowRenderer`).

xlrd (BSD) reads the workbook in this process: measured against LibreOffice converting to
XLSX and openpyxl reading that, it is many times faster and needs no second process
(BENCHMARKS.md, "Legacy formats"). Before xlrd, which builds every cell of a sheet in
memory, the `Workbook` stream's cell records are counted (MULRK records hold many) and a
workbook holding more than `MAX_CELLS` filled cells is refused (`document_too_large`): the
Excel 97 grid (65,536 x 256 cells, all filled) would otherwise cost gigabytes. The compound
file is opened by olefile first (`detect/ole2.py`), which refuses chains that loop.

Formulas give their cached values, dates read as ISO 8601 (the workbook's 1900 or 1904 date
system), error cells are left out. Title, author and dates come from the OLE2
SummaryInformation stream. A workbook with a FILEPASS record is password-protected:
`encrypted_document`.
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from typing import Any

import xlrd

from docingest.pipeline.detect.ole2 import open_ole2, read_stream
from docingest.pipeline.document import Block, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import CorruptDocument, DocumentTooLarge, EncryptedDocument
from docingest.pipeline.extract.records import RowRenderer, sheet_section

MAX_CELLS = 4_000_000
"""Most filled cells a workbook may hold (the text of that many is near
`max_extracted_chars`' default; xlrd holds them all at once)."""

_LABEL = "Excel workbook"
_ONE_CELL = {0x0203, 0x027E, 0x00FD, 0x0204, 0x0205, 0x0006, 0x00D6}
_MULRK, _FILEPASS = 0x00BD, 0x002F


def extract_xls(data: bytes, *, max_chars: int) -> ExtractedDocument:
    """Extract the visible sheets of the `.xls` in `data`, with its summary properties."""
    with open_ole2(data, label=_LABEL) as ole:
        stream = read_stream(ole, "Workbook", label=_LABEL) or read_stream(
            ole, "Book", label=_LABEL
        )
        properties = _summary(ole)
    if stream is None:
        raise CorruptDocument("The Excel workbook has no Workbook stream.")
    _check_cells(stream)
    try:
        book = xlrd.open_workbook(
            file_contents=data, on_demand=True, formatting_info=False, logfile=_Silent()
        )
    except xlrd.XLRDError as exc:
        if "encrypted" in str(exc).lower():
            raise EncryptedDocument(
                "This Excel workbook is password-protected; remove the password in Excel, "
                "save it again and upload that."
            ) from exc
        raise CorruptDocument(f"The Excel workbook is damaged and cannot be read ({exc}).") from exc
    except (struct.error, IndexError, ValueError, KeyError, AssertionError) as exc:
        raise CorruptDocument(f"The Excel workbook is damaged and cannot be read ({exc}).") from exc
    try:
        document = _extract(book, max_chars)
    except (struct.error, IndexError, ValueError, KeyError, AssertionError) as exc:
        raise CorruptDocument(f"The Excel workbook is damaged and cannot be read ({exc}).") from exc
    finally:
        book.release_resources()
    document.title, document.author, document.created, document.modified = properties
    return document


def _check_cells(stream: bytes) -> None:
    """Count the filled cells the BIFF records declare; refuse a password or too many."""
    cells, offset, end = 0, 0, len(stream) - 4
    while offset <= end:
        kind, length = struct.unpack_from("<HH", stream, offset)
        if kind in _ONE_CELL:
            cells += 1
        elif kind == _MULRK:
            cells += max(0, (length - 6) // 6)
        elif kind == _FILEPASS:
            raise EncryptedDocument(
                "This Excel workbook is password-protected; remove the password in Excel, "
                "save it again and upload that."
            )
        offset += 4 + length
    if cells > MAX_CELLS:
        raise DocumentTooLarge(
            f"The Excel workbook holds {cells:,} filled cells, more than the {MAX_CELLS:,} "
            "accepted; split it or save the sheets as CSV."
        )


def _extract(book: Any, max_chars: int) -> ExtractedDocument:
    blocks: list[Block] = []
    hidden: list[str] = []
    rows = 0
    for index in range(book.nsheets):
        sheet = book.sheet_by_index(index)
        title = " ".join(sheet.name.split())
        if sheet.visibility != 0:
            hidden.append(title)
            book.unload_sheet(index)
            continue
        renderer = RowRenderer(max_chars=max_chars, chars_so_far=_chars(blocks))
        for row in range(sheet.nrows):
            renderer.add(_value(cell, book.datemode) for cell in sheet.row(row))
        blocks.extend(sheet_section(title, renderer.finish()))
        rows += renderer.rows
        book.unload_sheet(index)
    extra: dict[str, Any] = {"sheets": book.nsheets, "rows": rows}
    if hidden:
        extra["hidden_sheets"] = hidden
    return ExtractedDocument(format=DocumentFormat.XLS, blocks=blocks, extra=extra)


def _value(cell: Any, datemode: int) -> object:
    kind = cell.ctype
    if kind == xlrd.XL_CELL_DATE:
        try:
            return xlrd.xldate_as_datetime(cell.value, datemode)
        except (ValueError, OverflowError, xlrd.xldate.XLDateError):
            return cell.value
    if kind == xlrd.XL_CELL_BOOLEAN:
        return bool(cell.value)
    if kind == xlrd.XL_CELL_NUMBER and float(cell.value).is_integer():
        return int(cell.value)
    if kind in (xlrd.XL_CELL_ERROR, xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return None
    return cell.value


def _summary(ole: Any) -> tuple[str | None, str | None, datetime | None, datetime | None]:
    """Title, author, created and modified from the SummaryInformation stream, if readable."""
    try:
        meta = ole.get_metadata()
    except Exception:  # olefile's property parser: the summary is optional
        return None, None, None, None

    def text(value: object) -> str | None:
        if isinstance(value, bytes):
            value = value.decode("cp1252", "replace")
        return " ".join(str(value).split()) or None if value else None

    return (
        text(meta.title),
        text(meta.author),
        _utc(meta.create_time),
        _utc(meta.last_saved_time),
    )


def _utc(value: object) -> datetime | None:
    if not isinstance(value, datetime) or value.year < 1980:  # FILETIME 0 reads as 1601
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _chars(blocks: list[Block]) -> int:
    return sum(len(block.text) + 2 for block in blocks)


class _Silent:
    """xlrd's log file: its warnings about odd records are not the user's business."""

    def write(self, _text: str) -> int:
        return 0
