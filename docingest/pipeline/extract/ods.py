"""ODS (OpenDocument spreadsheet): as XLSX, each visible sheet a section headed by its name,
its rows as named lines (`records.RowRenderer`); title, author and dates from `meta.xml`.

The package is opened by the shared pre-scan (`zip_container`), and `content.xml` is read
with lxml's `iterparse` (entities off, network off), each row cleared once rendered, so a
large sheet is never a whole tree. A cell's value is its `office:value` (numbers, dates as
written, booleans), or its paragraphs' text.

Repeat counts (`table:number-rows-repeated`, `table:number-columns-repeated`) are how
OpenDocument writes runs of identical cells: an empty run is skipped whatever it declares
(LibreOffice ends every sheet with a million empty rows), a filled run is expanded one row
at a time, so a declared repeat costs only the text it really yields, which the renderer
bounds (`max_extracted_chars`). Sheets whose style says `table:display="false"` are hidden,
listed in `extra["hidden_sheets"]`.
"""

from __future__ import annotations

import io
from typing import Any

from lxml import etree

from docingest.pipeline.document import Block, BlockKind, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import CorruptDocument
from docingest.pipeline.extract.odt import (
    OFFICE,
    STYLE,
    TABLE,
    TEXT,
    inline_text,
    one_line,
    read_metadata,
)
from docingest.pipeline.extract.odt import xml_parser as _parser
from docingest.pipeline.extract.records import RowRenderer
from docingest.pipeline.extract.zip_container import SafeZip, ZipLimits

_ROW, _CELL, _COVERED = TABLE + "table-row", TABLE + "table-cell", TABLE + "covered-table-cell"
_MAX_COLUMNS = 16_384
"""Most columns a row is expanded to (LibreOffice's and Excel's widest sheet)."""


def extract_ods(data: bytes, *, limits: ZipLimits, max_chars: int) -> ExtractedDocument:
    """Extract the visible sheets of the ODS in `data`, with `meta.xml`'s metadata."""
    with SafeZip(data, label="ODS", limits=limits) as package:
        if not package.has("content.xml"):
            raise CorruptDocument("The ODS has no content.xml, so it holds no sheet.")
        content, meta = package.read_xml("content.xml"), package.read_xml("meta.xml")
    try:
        document = _Sheets(max_chars).read(content)
        if meta:
            read_metadata(document, etree.fromstring(meta, _parser()))
    except etree.XMLSyntaxError as exc:
        raise CorruptDocument(f"The ODS's XML is malformed ({exc}).") from exc
    return document


class _Sheets:
    def __init__(self, max_chars: int) -> None:
        self.blocks: list[Block] = []
        self.hidden: list[str] = []
        self.rows = 0
        self.sheets = 0
        self._max_chars = max_chars
        self._hidden_styles: set[str] = set()
        self._renderer: RowRenderer | None = None

    def read(self, content: bytes) -> ExtractedDocument:
        events = etree.iterparse(
            io.BytesIO(content),
            events=("start", "end"),
            resolve_entities=False,
            no_network=True,
            load_dtd=False,
        )
        for event, element in events:
            tag = element.tag
            if event == "start":
                if tag == TABLE + "table":
                    self._start_sheet(element)
                continue
            if tag == STYLE + "style":
                self._note_style(element)
            elif tag == _ROW and _in_sheet(element):
                self._row(element)
                element.clear(keep_tail=False)
            elif tag == TABLE + "table" and element.getparent().tag == OFFICE + "spreadsheet":
                self._end_sheet(element)
                element.clear(keep_tail=False)
        extra: dict[str, Any] = {"sheets": self.sheets, "rows": self.rows}
        if self.hidden:
            extra["hidden_sheets"] = self.hidden
        return ExtractedDocument(format=DocumentFormat.ODS, blocks=self.blocks, extra=extra)

    def _note_style(self, style: Any) -> None:
        properties = style.find(STYLE + "table-properties")
        if properties is not None and properties.get(TABLE + "display") == "false":
            self._hidden_styles.add(style.get(STYLE + "name", ""))

    def _start_sheet(self, table: Any) -> None:
        parent = table.getparent()
        if parent is None or parent.tag != OFFICE + "spreadsheet":
            return  # a table inside a shape: its rows belong to no sheet
        self.sheets += 1
        if table.get(TABLE + "style-name") in self._hidden_styles:
            self._renderer = None
            self.hidden.append(one_line(table.get(TABLE + "name", "")))
            return
        chars = sum(len(block.text) + 2 for block in self.blocks)
        self._renderer = RowRenderer(max_chars=self._max_chars, chars_so_far=chars)

    def _row(self, row: Any) -> None:
        if self._renderer is None:
            return
        values = _row_values(row)
        if not any(value for value in values):
            return  # an empty run: skipped whatever it declares
        repeat = _count(row.get(TABLE + "number-rows-repeated"))
        for _ in range(repeat):  # bounded by the renderer's character limit
            self._renderer.add(values)

    def _end_sheet(self, table: Any) -> None:
        renderer, self._renderer = self._renderer, None
        if renderer is None:
            return
        title = one_line(table.get(TABLE + "name", ""))
        sheet_blocks = renderer.finish()
        while len(sheet_blocks) > 1 and sheet_blocks[0].text == title:
            sheet_blocks.pop(0)
        if sheet_blocks:
            self.blocks.append(Block(title, BlockKind.HEADING, level=1))
            self.blocks.extend(sheet_blocks)
        self.rows += renderer.rows


def _in_sheet(row: Any) -> bool:
    """Whether `row` belongs to a sheet's own table (not to a table drawn in a shape)."""
    parent = row.getparent()
    while parent is not None and parent.tag != TABLE + "table":
        parent = parent.getparent()
    grand = parent.getparent() if parent is not None else None
    return grand is not None and grand.tag == OFFICE + "spreadsheet"


def _row_values(row: Any) -> list[object]:
    """The row's cell values, runs of filled cells expanded, trailing empty ones dropped."""
    values: list[object] = []
    for cell in row:
        if cell.tag not in (_CELL, _COVERED):
            continue
        value = _cell_value(cell) if cell.tag == _CELL else ""
        repeat = _count(cell.get(TABLE + "number-columns-repeated"))
        repeat = min(repeat, _MAX_COLUMNS - len(values))
        if repeat <= 0:
            break
        values.extend([value] * repeat)
    while values and values[-1] in ("", None):
        values.pop()
    return values


def _cell_value(cell: Any) -> object:
    kind = cell.get(OFFICE + "value-type")
    if kind in ("float", "percentage", "currency"):
        raw = cell.get(OFFICE + "value", "")
        try:
            number = float(raw)
        except ValueError:
            number = None
        if number is not None:
            return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if kind == "date" and (raw := cell.get(OFFICE + "date-value")):
        return raw.replace("T00:00:00", "")
    if kind == "boolean":
        return cell.get(OFFICE + "boolean-value") == "true"
    texts = [inline_text(p)[0] for p in cell.iter(TEXT + "p")]
    return one_line(" ".join(texts))


def _count(value: str | None) -> int:
    return int(value) if value and value.isdigit() and int(value) > 0 else 1
