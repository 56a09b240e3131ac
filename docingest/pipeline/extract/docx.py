"""DOCX extraction: body blocks in document order, core properties as metadata.

python-docx opens the package (once `docx_zip.repack_docx` has checked it) and supplies the
styles and core properties. The body is walked on the XML itself: python-docx's
`Paragraph.text` skips tracked insertions, content controls, simple fields and text boxes,
and `Row.cells` repeats the text of merged cells.

Choices:
- Text boxes (`w:txbxContent`) come after the paragraph that anchors them; of an
  `mc:AlternateContent` only `mc:Choice` is read (`mc:Fallback` repeats the same text).
- Headers and footers are skipped: their repeated lines ("Page 3 of 9", a company name)
  would pollute every chunk. The first section's default header is kept in
  `extra["header"]`. Footnotes, endnotes and comments are not extracted.
- List items get "- " and two spaces of indentation per level (Word computes the numbers
  when rendering; they are not in the XML); consecutive items form one LIST block.
- Strict OOXML is read by mapping its namespaces to Transitional ones (see `docx_zip`).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from docx.opc.constants import CONTENT_TYPE as CT
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.opc.exceptions import PackageNotFoundError
from docx.package import Package
from lxml import etree

from docingest.pipeline.document import Block, BlockKind, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import CorruptDocument, UnsupportedFormat
from docingest.pipeline.extract.docx_zip import repack_docx

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_M_T = "{http://schemas.openxmlformats.org/officeDocument/2006/math}t"
_Element = Any  # an lxml element; lxml ships no type information here

_BLOCKS = (_W + "p", _W + "tbl")
# Wrappers whose children are block content (or rows, cells) again. Anything else between
# blocks (w:sdtPr, w:sectPr, bookmarks, mc:Fallback) holds no body text.
_WRAPPERS = frozenset(
    {_W + "sdt", _W + "sdtContent", _W + "customXml", _MC + "AlternateContent", _MC + "Choice"}
)
# Inline elements whose subtree holds no visible text of the paragraph.
_SKIPPED_INLINE = frozenset(
    {_W + "pPr", _W + "rPr", _W + "sdtPr", _W + "del", _W + "moveFrom", _MC + "Fallback"}
)
_INLINE_CHARS = {_W + "tab": "\t", _W + "ptab": "\t", _W + "br": "\n", _W + "cr": "\n"}
_INLINE_CHARS[_W + "noBreakHyphen"] = "-"

# Word's "HTML Preformatted" is left out: in the corpus it holds prose pasted from the web.
_CODE_STYLES = frozenset({"preformatted text", "source text", "code", "macro text"})
_HEADING_NAME = re.compile(r"heading\s*(\d+)")
_LIST_NAME = re.compile(r"list (?:bullet|number)(?: (\d))?")
_SPACES = re.compile(r"[^\S\n]+")
_MAX_HEADING_LEVEL = 6


def extract_docx(
    data: bytes, *, max_uncompressed_bytes: int, max_compression_ratio: float
) -> ExtractedDocument:
    """Extract the blocks and core properties of the DOCX in `data`.

    Raises `DocumentTooLarge` for ZIP bombs, `EncryptedDocument` for password-protected
    files, `UnsupportedFormat` for other Office packages and `CorruptDocument` for
    packages that cannot be read.
    """
    repacked = repack_docx(
        data,
        max_uncompressed_bytes=max_uncompressed_bytes,
        max_compression_ratio=max_compression_ratio,
    )
    try:
        main_part = Package.open(io.BytesIO(repacked)).main_document_part
    except (PackageNotFoundError, KeyError, ValueError, etree.XMLSyntaxError) as exc:
        raise CorruptDocument(f"The DOCX package is damaged and cannot be opened ({exc}).") from exc
    if main_part.content_type != CT.WML_DOCUMENT_MAIN:
        raise UnsupportedFormat(
            f"The file is an Office package whose main part is {main_part.content_type!r}, "
            "not a Word document; only .docx is supported."
        )
    document = main_part.document
    try:
        styles = _StyleTable(document.styles.element)
        walker = _BodyWalker(styles)
        walker.walk(document.element.body)
        header = _first_header_text(document, styles)
        core = _core_properties(document)
    except (KeyError, ValueError) as exc:
        raise CorruptDocument(
            f"The DOCX is incomplete: a part it refers to is missing or malformed ({exc})."
        ) from exc
    if header:
        core["extra"]["header"] = header
    core["title"] = core["title"] or walker.title
    return ExtractedDocument(format=DocumentFormat.DOCX, blocks=walker.blocks, **core)


@dataclass(frozen=True, slots=True)
class _Style:
    """What a paragraph style, with its based-on chain resolved, means for extraction."""

    heading_level: int = 0
    is_title: bool = False
    list_level: int | None = None
    is_code: bool = False


class _StyleTable:
    """Paragraph styles by id, each resolved once (documents can define thousands)."""

    def __init__(self, styles_element: _Element) -> None:
        self._raw: dict[str, _Element] = {}
        self._resolved: dict[str | None, _Style] = {}
        self._default_id: str | None = None
        for style in styles_element.iterchildren(_W + "style"):
            if style.get(_W + "type", "paragraph") == "paragraph":
                self._raw[style.get(_W + "styleId")] = style
                if style.get(_W + "default") in ("1", "true", "on"):
                    self._default_id = style.get(_W + "styleId")

    def for_paragraph(self, p_pr: _Element | None) -> _Style:
        """Return the resolved style of a paragraph, given its `w:pPr`."""
        style_id = (_val(p_pr, "pStyle") if p_pr is not None else None) or self._default_id
        if style_id not in self._resolved:
            self._resolved[style_id] = self._resolve(style_id)
        return self._resolved[style_id]

    def _resolve(self, style_id: str | None) -> _Style:
        chain: list[_Element] = []
        while style_id in self._raw and self._raw[style_id] not in chain:
            chain.append(self._raw[style_id])
            style_id = _val(chain[-1], "basedOn")
        names = [(_val(style, "name") or "").strip().lower() for style in chain]
        heading_level, is_title, list_level = 0, False, None
        for style, name in zip(chain, names, strict=True):
            outline = _outline_heading(style.find(_W + "pPr"))
            if (level := _heading_from_name(name)) or outline is not None:
                heading_level, is_title = level or outline or 0, name == "title"
                break
        for style, name in zip(chain, names, strict=True):
            if (num_pr := style.find(f"{_W}pPr/{_W}numPr")) is not None:
                list_level = _numbering_level(num_pr, None)
                break
            if match := _LIST_NAME.fullmatch(name):
                list_level = int(match.group(1) or 1) - 1
                break
        is_code = any(name in _CODE_STYLES for name in names)
        return _Style(heading_level, is_title, list_level, is_code)


class _BodyWalker:
    """Turn block content (body, header, text box) into blocks, in document order."""

    def __init__(self, styles: _StyleTable) -> None:
        self.styles = styles
        self.blocks: list[Block] = []
        self.title: str | None = None
        self._pending_kind: BlockKind | None = None
        self._pending: list[str] = []

    def walk(self, container: _Element) -> None:
        """Emit the blocks of a container element's children, then flush."""
        for child in _children(container, _BLOCKS):
            if child.tag == _W + "p":
                self._paragraph(child)
            else:
                self._flush()
                self._add(Block(_table_text(child), BlockKind.TABLE))
        self._flush()

    def _paragraph(self, p: _Element) -> None:
        raw, boxes = _paragraph_content(p)
        p_pr = p.find(_W + "pPr")
        style = self.styles.for_paragraph(p_pr)
        own_outline = _outline_heading(p_pr)  # direct formatting wins over the style
        level = style.heading_level if own_outline is None else own_outline
        num_pr = p_pr.find(_W + "numPr") if p_pr is not None else None
        list_level = style.list_level if num_pr is None else _numbering_level(num_pr, style)
        if style.is_code:
            self._pend(BlockKind.CODE, raw.rstrip("\n"))
        elif level:
            text = _one_line(raw)
            if style.is_title and self.title is None and text:
                self.title = text
            self._flush()
            self._add(Block(text, BlockKind.HEADING, level=level))
        elif list_level is not None and (text := _one_line(raw)):
            self._pend(BlockKind.LIST, "  " * list_level + "- " + text)
        elif text := _clean(raw):
            self._flush()
            self._add(Block(text, BlockKind.PARAGRAPH))
        for box in boxes:
            self._flush()
            self.walk(box)

    def _pend(self, kind: BlockKind, line: str) -> None:
        """Add a line to the LIST or CODE block being built; empty paragraphs do not end it."""
        if self._pending_kind is not kind:
            self._flush()
            self._pending_kind = kind
        self._pending.append(line)

    def _flush(self) -> None:
        if self._pending_kind is not None:
            self._add(Block("\n".join(self._pending).strip("\n"), self._pending_kind))
        self._pending_kind, self._pending = None, []

    def _add(self, block: Block) -> None:
        if block.text.strip():
            self.blocks.append(block)


def _children(element: _Element, tags: tuple[str, ...]) -> Iterator[_Element]:
    """Yield the children with one of `tags`, looking through content controls."""
    for child in element:
        if child.tag in tags:
            yield child
        elif child.tag in _WRAPPERS:
            yield from _children(child, tags)


def _paragraph_content(p: _Element) -> tuple[str, list[_Element]]:
    """Return a paragraph's raw text and the text boxes anchored in it."""
    parts: list[str] = []
    boxes: list[_Element] = []
    _collect_inline(p, parts, boxes)
    return "".join(parts), boxes


def _collect_inline(element: _Element, parts: list[str], boxes: list[_Element]) -> None:
    for child in element:
        tag = child.tag
        if tag == _W + "t" or tag == _M_T:
            parts.append(child.text or "")
        elif tag in _INLINE_CHARS:
            parts.append(_INLINE_CHARS[tag])
        elif tag == _W + "txbxContent":
            boxes.append(child)
        elif tag not in _SKIPPED_INLINE and len(child):
            _collect_inline(child, parts, boxes)


def _table_text(tbl: _Element, *, cell_separator: str = " | ", row_separator: str = "\n") -> str:
    """Render a table one row per line, cells joined by " | ", each merged cell once.

    Empty cells at either end of a row are dropped (layout columns, icon cells); empty
    cells between filled ones are kept so that columns still line up.
    """
    rows = []
    for row in _children(tbl, (_W + "tr",)):
        cells = [_cell_text(tc) for tc in _children(row, (_W + "tc",))]
        while cells and not cells[-1]:
            cells.pop()
        while cells and not cells[0]:
            cells.pop(0)
        if cells:
            rows.append(cell_separator.join(cells))
    return row_separator.join(rows)


def _cell_text(tc: _Element) -> str:
    """Return what a cell holds (paragraphs, nested tables, text boxes) as one line."""
    pieces = []
    for child in _children(tc, _BLOCKS):
        if child.tag == _W + "tbl":
            pieces.append(_table_text(child, cell_separator=" ", row_separator=" "))
            continue
        raw, boxes = _paragraph_content(child)
        pieces.append(raw)
        pieces.extend(_cell_text(box) for box in boxes)
    return _one_line(" ".join(pieces))


def _numbering_level(num_pr: _Element, style: _Style | None) -> int | None:
    """Return the list level of a `w:numPr`, or None when it switches numbering off."""
    inherited = style.list_level if style else None
    num_id = _val(num_pr, "numId")
    if num_id == "0" or (num_id is None and inherited is None):
        return None
    ilvl = _val(num_pr, "ilvl") or ""
    return min(int(ilvl), 8) if ilvl.isdigit() else inherited or 0


def _heading_from_name(name: str) -> int:
    """Heading level implied by a (lower-cased) style name, 0 if none."""
    if name in ("title", "heading"):  # "Heading": LibreOffice's parent of all headings
        return 1
    if name == "subtitle":
        return 2
    match = _HEADING_NAME.fullmatch(name)
    return min(int(match.group(1)), _MAX_HEADING_LEVEL) if match else 0


def _outline_heading(p_pr: _Element | None) -> int | None:
    """Heading level from `w:outlineLvl` (0-8 → 1-6; 9 is body text, 0); None if absent."""
    value = (_val(p_pr, "outlineLvl") if p_pr is not None else None) or ""
    if not value.isdigit():
        return None
    return 0 if int(value) >= 9 else min(int(value) + 1, _MAX_HEADING_LEVEL)


def _val(element: _Element, child: str) -> str | None:
    node = element.find(_W + child)
    return None if node is None else node.get(_W + "val")


def _clean(text: str) -> str:
    """Collapse spaces inside lines, strip lines, drop empty ones."""
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _first_header_text(document: Any, styles: _StyleTable) -> str | None:
    """Return the first section's default header text, if it has one."""
    sections = document.sections
    if not len(sections) or sections[0].header.is_linked_to_previous:
        return None
    walker = _BodyWalker(styles)
    walker.walk(sections[0].header.part.element)
    return "\n".join(block.text for block in walker.blocks) or None


def _core_properties(document: Any) -> dict[str, Any]:
    """Return title, author, created, modified and extra from the core properties.

    python-docx invents defaults (title "Word Document", modified now) for a package
    without a core-properties part, so the part's presence is checked first.
    """
    try:
        document.part.package.part_related_by(RT.CORE_PROPERTIES)
    except KeyError:
        return {"title": None, "author": None, "created": None, "modified": None, "extra": {}}
    props = document.core_properties
    extra = {
        "subject": _one_line(props.subject or ""),
        "keywords": _one_line(props.keywords or ""),
        "category": _one_line(props.category or ""),
        "last_modified_by": _one_line(props.last_modified_by or ""),
    }
    return {
        "title": _one_line(props.title or "") or None,  # also turns NBSP into a space
        "author": _one_line(props.author or "") or None,
        "created": _utc(props.created),
        "modified": _utc(props.modified),
        "extra": {key: value for key, value in extra.items() if value},
    }


def _utc(value: datetime | None) -> datetime | None:
    """Return `value` in UTC; a date without an offset is taken as UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
