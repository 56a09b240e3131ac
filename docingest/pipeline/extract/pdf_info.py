"""What a PDF says about itself through PDFium: outline headings, page labels, metadata."""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from docingest.pipeline.document import ExtractedDocument
from docingest.pipeline.extract.page_lines import Heading, clean

_TITLE_PREFIX = re.compile(r"^Microsoft (?:Word|Excel|PowerPoint) - ")
_FILE_NAME = re.compile(
    r"^[^/\\]+\.(?:pdf|docx?|rtf|odt|xlsx?|pptx?|tex|dvi|ps|indd|txt)$", re.IGNORECASE
)
_JUNK_TITLES = {"untitled", "untitled document", "title", "unknown", "none"}
# D:YYYYMMDDHHmmSS followed by Z, +HH'mm' or -HH'mm' (ISO 32000-1, 7.9.4); all but the year
# are optional, and producers write the offset with or without its apostrophes.
_PDF_DATE = re.compile(
    r"^(?:D:)?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?"
    r"(?:(Z)|([+-])(\d{2})'?(\d{2})?'?)?"
)
_MAX_OUTLINE_ENTRIES = 100_000
"""Outline entries read at most: a cyclic or absurd outline costs headings, not the job."""
_LOCATE_PAGES_FROM = 100
"""Outline entries above which every page is located first (`_locate_pages`): each lookup
costs about 0.13 µs a page before, the walk 22 µs a page."""


def outline_headings(pdf: pdfium.PdfDocument, page_count: int) -> dict[int, list[Heading]]:
    """Map 0-based page index to its outline entries (title, level), in outline order.

    A broken outline costs the headings, never the document.
    """
    by_page: dict[int, list[Heading]] = defaultdict(list)
    entries: list[tuple[str, int, pdfium.PdfDest]] = []
    try:
        for count, item in enumerate(pdf.get_toc(max_depth=16)):
            if count >= _MAX_OUTLINE_ENTRIES:
                break
            title = clean(item.get_title() or "")
            destination = item.get_dest()
            if title and destination is not None:
                entries.append((title, min(item.level + 1, 6), destination))
    except (pdfium.PdfiumError, ValueError, UnicodeDecodeError):
        pass  # the entries read so far still count
    if len(entries) > _LOCATE_PAGES_FROM:
        _locate_pages(pdf, page_count)
    try:
        for title, level, destination in entries:
            page = destination.get_index()
            if page is not None and 0 <= page < page_count:
                by_page[page].append((title, level))
    except (pdfium.PdfiumError, ValueError):
        return by_page
    return by_page


def _locate_pages(pdf: pdfium.PdfDocument, page_count: int) -> None:
    """Have PDFium find every page's object in the page tree once, before the outline's
    destinations are looked up: it looks a page up by walking the tree from the start each
    time it has not located it yet (the R manual's 1,426 entries over 2,415 pages: 0.45 s,
    0.1 s with this walk first; BENCHMARKS.md, "PDF structure")."""
    size = pdfium_c.FS_SIZEF()
    for index in range(page_count):
        pdfium_c.FPDF_GetPageSizeByIndexF(pdf, index, size)


def page_labels(pdf: pdfium.PdfDocument, page_count: int) -> list[str]:
    """Return each page's printed label (e.g. "xii"), or its number where it has none."""
    labels = []
    for index in range(page_count):
        try:
            label = pdf.get_page_label(index)
        except (pdfium.PdfiumError, UnicodeDecodeError):
            label = ""
        labels.append(label or str(index + 1))
    return labels


def fill_metadata(document: ExtractedDocument, pdf: pdfium.PdfDocument) -> None:
    """Copy title, author, dates, producer and creator from the document information."""
    try:
        info = pdf.get_metadata_dict(skip_empty=True)
    except (pdfium.PdfiumError, UnicodeDecodeError):
        return
    title = _text(info, "Title")
    if title:
        title = _TITLE_PREFIX.sub("", title)
        if title.casefold() in _JUNK_TITLES or _FILE_NAME.match(title):
            title = None
    document.title = title or None
    document.author = _text(info, "Author")
    document.created = parse_pdf_date(info.get("CreationDate"))
    document.modified = parse_pdf_date(info.get("ModDate"))
    for key, name in (("Producer", "producer"), ("Creator", "creator")):
        value = _text(info, key)
        if value:
            document.extra[name] = value


def _text(info: dict[str, Any], key: str) -> str | None:
    value = info.get(key)
    if not isinstance(value, str):
        return None
    return clean(value.replace("\n", " ")) or None


def parse_pdf_date(value: object) -> datetime | None:
    """Parse a PDF date string (`D:20071206080123-05'00'`); None when absent or malformed.

    A date without an offset is taken as UTC, as pypdf did before.
    """
    if not isinstance(value, str):
        return None
    match = _PDF_DATE.match(value.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second, zulu, sign, off_h, off_m = match.groups()
    zone: timezone = UTC
    if sign and not zulu:
        offset = timedelta(hours=int(off_h), minutes=int(off_m or 0))
        zone = timezone(offset if sign == "+" else -offset)
    try:
        return datetime(
            int(year),
            int(month or 1),
            int(day or 1),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            tzinfo=zone,
        )
    except ValueError:
        return None
