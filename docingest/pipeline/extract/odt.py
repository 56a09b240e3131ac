"""ODT (OpenDocument text): `content.xml` to headings, paragraphs, lists and tables, like DOCX.

The package is opened by the shared pre-scan (`zip_container`); `content.xml` and `meta.xml`
are parsed with lxml, entities off, network off, and lxml's default depth limit (no
`huge_tree`). The body is walked with an explicit stack, never recursion.

Choices, as for DOCX: a list is one LIST block, "- " per item, indented two spaces per level;
a table is one TABLE block, a row per line, cells joined by " | " (covered cells of merged
ranges left out, repeat counts ignored: they only repeat empty cells); text boxes come after
the paragraph that anchors them; footnotes, annotations and generated indexes (a table of
contents repeats the headings) are skipped. A paragraph styled Title (directly or through an
automatic style) is a level-1 heading and the document's title if the metadata has none.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from lxml import etree

from docingest.pipeline.document import Block, BlockKind, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import CorruptDocument
from docingest.pipeline.extract.zip_container import SafeZip, ZipLimits

TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
META = "{urn:oasis:names:tc:opendocument:xmlns:meta:1.0}"
DC = "{http://purl.org/dc/elements/1.1/}"
_Element = Any  # an lxml element

_SKIPPED = frozenset(
    TEXT + name
    for name in (
        "note annotation tracked-changes sequence-decls table-of-content alphabetical-index "
        "illustration-index table-index object-index user-index bibliography"
    ).split()
) | {OFFICE + "annotation", OFFICE + "forms"}
_CONTAINERS = frozenset((TEXT + "section", TEXT + "index-body", DRAW + "text-box", DRAW + "frame"))
_MAX_SPACES = 64
_MAX_HEADING_LEVEL = 6


def xml_parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


def extract_odt(data: bytes, *, limits: ZipLimits) -> ExtractedDocument:
    """Extract the body of the ODT in `data`, with title, author and dates from `meta.xml`."""
    with SafeZip(data, label="ODT", limits=limits) as package:
        if not package.has("content.xml"):
            raise CorruptDocument("The ODT has no content.xml, so it holds no text.")
        content, meta = package.read_xml("content.xml"), package.read_xml("meta.xml")
    try:
        root = etree.fromstring(content, xml_parser())
        meta_root = etree.fromstring(meta, xml_parser()) if meta else None
    except etree.XMLSyntaxError as exc:
        raise CorruptDocument(f"The ODT's XML is malformed ({exc}).") from exc
    body = root.find(f"{OFFICE}body/{OFFICE}text")
    if body is None:
        raise CorruptDocument("The ODT's content.xml has no text body (office:text).")
    walker = _BodyWalker(_title_styles(root))
    walker.walk(body)
    document = ExtractedDocument(format=DocumentFormat.ODT, blocks=walker.blocks)
    if meta_root is not None:
        read_metadata(document, meta_root)
    document.title = document.title or walker.title
    return document


def _title_styles(root: _Element) -> frozenset[str]:
    """Names of the paragraph styles that are the Title style or derive from it."""
    names = {"Title"}
    for style in root.iterfind(f"{OFFICE}automatic-styles/{STYLE}style"):
        if style.get(STYLE + "parent-style-name") == "Title":
            names.add(style.get(STYLE + "name", ""))
    return frozenset(names)


class _BodyWalker:
    def __init__(self, title_styles: frozenset[str]) -> None:
        self.blocks: list[Block] = []
        self.title: str | None = None
        self._title_styles = title_styles

    def walk(self, container: _Element) -> None:
        stack: list[_Element] = list(reversed(container))
        while stack:
            element = stack.pop()
            tag = element.tag
            if tag in _SKIPPED:
                continue
            if tag in _CONTAINERS:
                stack.extend(reversed(element))
            elif tag == TEXT + "h":
                self._heading(element, stack)
            elif tag == TEXT + "p":
                self._paragraph(element, stack)
            elif tag == TEXT + "list":
                self._add(Block(list_text(element), BlockKind.LIST))
            elif tag == TABLE + "table":
                self._add(Block(table_text(element), BlockKind.TABLE))

    def _heading(self, element: _Element, stack: list[_Element]) -> None:
        text, boxes = inline_text(element)
        level = element.get(TEXT + "outline-level", "1")
        depth = min(int(level), _MAX_HEADING_LEVEL) if level.isdigit() and level != "0" else 1
        self._add(Block(one_line(text), BlockKind.HEADING, level=depth))
        stack.extend(reversed(boxes))

    def _paragraph(self, element: _Element, stack: list[_Element]) -> None:
        text, boxes = inline_text(element)
        if element.get(TEXT + "style-name") in self._title_styles and (line := one_line(text)):
            self.title = self.title or line
            self._add(Block(line, BlockKind.HEADING, level=1))
        else:
            self._add(Block(clean_text(text)))
        stack.extend(reversed(boxes))

    def _add(self, block: Block) -> None:
        if block.text.strip():
            self.blocks.append(block)


def inline_text(element: _Element) -> tuple[str, list[_Element]]:
    """A paragraph's text and the text boxes (draw:frame) anchored in it, without recursion."""
    parts: list[str] = [element.text or ""]
    boxes: list[_Element] = []
    stack: list[tuple[_Element, bool]] = [(child, False) for child in reversed(element)]
    while stack:
        node, closing = stack.pop()
        if closing:
            parts.append(node.tail or "")
            continue
        tag = node.tag
        if tag == TEXT + "s":
            count = node.get(TEXT + "c", "1")
            parts.append(" " * min(int(count) if count.isdigit() else 1, _MAX_SPACES))
        elif tag == TEXT + "tab":
            parts.append("\t")
        elif tag == TEXT + "line-break":
            parts.append("\n")
        elif tag == DRAW + "frame":
            boxes.append(node)
        elif tag not in _SKIPPED and isinstance(tag, str):
            parts.append(node.text or "")
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node))
            continue
        parts.append(node.tail or "")
    return "".join(parts), boxes


def list_text(root: _Element) -> str:
    """Render a list, nested lists indented two spaces per level (capped at eight)."""
    lines: list[str] = []
    stack: list[tuple[_Element, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if node.tag == TEXT + "list":
            items = [c for c in node if c.tag in (TEXT + "list-item", TEXT + "list-header")]
            stack.extend((item, depth) for item in reversed(items))
            continue
        marker = "- "
        entries: list[tuple[_Element, int]] = []
        for child in node:
            if child.tag == TEXT + "list":
                entries.append((child, depth + 1))
            elif child.tag in (TEXT + "p", TEXT + "h") and (
                text := one_line(inline_text(child)[0])
            ):
                lines.append("  " * min(depth, 8) + marker + text)
                marker = "  "  # a second paragraph of the same item
        stack.extend(reversed(entries))
    return "\n".join(lines)


def table_text(table: _Element) -> str:
    rows = []
    for row in table.iter(TABLE + "table-row"):
        if _owning_table(row) is not table:
            continue  # a row of a nested table: its text is in its cell's line
        cells = [
            one_line(" ".join(_cell_texts(cell))) for cell in row.iterchildren(TABLE + "table-cell")
        ]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            rows.append(" | ".join(cells))
    return "\n".join(rows)


def _owning_table(row: _Element) -> _Element:
    parent = row.getparent()
    while parent is not None and parent.tag != TABLE + "table":
        parent = parent.getparent()
    return parent


def _cell_texts(cell: _Element) -> list[str]:
    return [inline_text(p)[0] for p in cell.iter(TEXT + "p", TEXT + "h")]


def read_metadata(document: ExtractedDocument, meta: _Element) -> None:
    def first(*paths: str) -> str | None:
        for path in paths:
            node = meta.find(f"{OFFICE}meta/{path}")
            if node is not None and (text := one_line(node.text or "")):
                return text
        return None

    document.title = first(DC + "title")
    document.author = first(META + "initial-creator", DC + "creator")
    document.created = _date(first(META + "creation-date"))
    document.modified = _date(first(DC + "date"))
    if language := first(DC + "language"):
        document.extra["language"] = language


def _date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:  # LibreOffice writes nanoseconds; Python reads at most microseconds
        head, dot, fraction = value.partition(".")
        moment = datetime.fromisoformat(head + (dot + fraction[:6] if dot else ""))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def clean_text(text: str) -> str:
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def one_line(text: str) -> str:
    return " ".join(text.split())
