"""PDF extraction with pypdf, page by page.

Reading order: pypdf's plain mode emits text in content-stream order, which for LaTeX,
Word and GPO output is column by column (checked on the 2-column DPR and NAACL papers and
the 3-column Federal Register); layout mode lays glyphs out on a character grid and so
interleaves the lines of neighbouring columns. Plain mode is also the faster one.

Paragraphs: plain mode gives one line per text line and almost never a blank line, so a
paragraph ends after a line noticeably shorter than the page's usual line (unless the next
line starts in lower case: the sentence goes on), before a bulleted line, before a short
unpunctuated line after a finished sentence (a title such as "4 Experimental Setup"), at a
blank line and at a heading. Lines are joined with spaces; "infor-" + "mation" becomes
"information" when a letter and a hyphen end the line and a lower-case letter starts the
next, unless the cut word looks like a compound's head and keeps its hyphen: one letter
("d-dimensional"), a hyphen already ("state-of-the-art"), digits or inner capitals
("BERT-based"). A plain word such as "well-" + "known" loses its hyphen: the rule's cost.

Headings come only from the PDF outline (bookmarks), never from font sizes: each entry
becomes a heading on its destination page, in place of the line (or two) that spells its
title, or before the page's first block when none does.

The damaged-xref datasheet of the corpus is reported as corrupt rather than recovered: its
page tree root (object 172) is missing from the file, with objects 79-174, so page order is
lost, and two of the three page objects left lose their fonts and give only U+FFFD.

pypdf's DependencyError (no `cryptography` for an AES file) is let through untranslated: it
means a broken install, not a bad upload, and must not be reported as a corrupt document.

A stream pypdf stops inflating at its output limit (75 MB by default) makes the whole file
`document_too_large`: a decompression bomb, not a damaged page to skip.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from io import BytesIO
from typing import Any

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError, LimitReachedError, PyPdfError

from pipeline.document import Block, BlockKind, DocumentFormat, ExtractedDocument, PageReporter
from pipeline.errors import (
    CorruptDocument,
    DocumentTooLarge,
    EmptyDocument,
    EncryptedDocument,
    IngestError,
    NoTextFound,
)

# What pypdf raises on a malformed file besides its own errors (it parses untrusted bytes
# with plain Python, so index, key and type errors leak out of broken structures).
_PARSE_ERRORS = (
    PyPdfError,
    ValueError,
    KeyError,
    TypeError,
    AttributeError,
    IndexError,
    AssertionError,
    RecursionError,
    ZeroDivisionError,
    OverflowError,
)

_SHORT_LINE_RATIO = 0.75
"""A line shorter than this share of the page's usual line length may end a paragraph."""

_LIGATURES = {code: unicodedata.normalize("NFKC", chr(code)) for code in range(0xFB00, 0xFB07)}
_CONTROLS: dict[int, str | None] = dict.fromkeys([*range(0, 9), *range(11, 32), *range(127, 160)])
_TRANSLATION = str.maketrans({**_CONTROLS, **_LIGATURES, 0x09: " ", 0x0D: "\n", 0xFFFD: None})

_SPACES = re.compile(r"[ \u00a0\u2000-\u200a\u3000]+")
_BULLET = re.compile(r"^[•◦▪●○■□►➢\uf0a7\uf0b7]")
_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
_NUMBERING = re.compile(
    r"^(?:(?:chapter|section|part|appendix)\s+)?"
    r"(?:\d+|[ivxlcdm]+|[a-z])(?:[.\-]\w+)*[.):]?\s+",
    re.IGNORECASE,
)
_TITLE_PREFIX = re.compile(r"^Microsoft (?:Word|Excel|PowerPoint) - ")
_FILE_NAME = re.compile(
    r"^[^/\\]+\.(?:pdf|docx?|rtf|odt|xlsx?|pptx?|tex|dvi|ps|indd|txt)$", re.IGNORECASE
)
_JUNK_TITLES = {"untitled", "untitled document", "title", "unknown", "none"}


def extract_pdf(
    data: bytes, *, max_pages: int, on_page: PageReporter | None = None
) -> ExtractedDocument:
    """Extract the text of `data`, a PDF of at most `max_pages` pages, as blocks.

    `on_page(done, total)` is called after each page, for progress.

    Raises `EmptyDocument` for 0 bytes or no pages, `EncryptedDocument` when a password is
    needed, `CorruptDocument` when pypdf cannot read the structure or any page,
    `DocumentTooLarge` above `max_pages`, and `NoTextFound` when no page has a text layer.
    """
    if not data:
        raise EmptyDocument("The file is empty (0 bytes); upload the PDF again.")
    reader, encrypted = _open(data)
    try:
        page_count = len(reader.pages)
    except _PARSE_ERRORS as exc:
        raise _unreadable(exc) from exc
    if page_count == 0:
        raise EmptyDocument("The PDF has no pages.")
    if page_count > max_pages:
        raise DocumentTooLarge(
            f"The PDF has {page_count:,} pages, above the limit of {max_pages:,}; "
            "split it into smaller files."
        )
    headings = _outline_headings(reader, page_count)
    labels = _page_labels(reader, page_count)
    blocks: list[Block] = []
    failed_pages: list[int] = []
    has_text = False
    for index in range(page_count):
        try:
            text = reader.pages[index].extract_text()
        except (DependencyError, MemoryError):
            raise
        except Exception as exc:  # any failure in one page's content must not lose the others
            if _is_bomb(exc):
                raise _unreadable(exc) from exc
            failed_pages.append(index + 1)
            text = ""
        lines = _clean_lines(text, page_label=labels[index], page_number=index + 1)
        has_text = has_text or any(lines)
        blocks.extend(_page_blocks(lines, page=index + 1, headings=headings.get(index, [])))
        if on_page is not None:
            on_page(index + 1, page_count)
    if not has_text:
        raise _no_text(failed_pages, page_count)
    document = ExtractedDocument(format=DocumentFormat.PDF, blocks=blocks, pages=page_count)
    _fill_metadata(document, reader)
    document.extra["encrypted"] = encrypted
    if failed_pages:
        document.extra["failed_pages"] = failed_pages
    return document


def _no_text(failed_pages: list[int], page_count: int) -> CorruptDocument | NoTextFound:
    """Why no page gave text: some could not be read (damaged), or none has a text layer."""
    if failed_pages:
        return CorruptDocument(
            f"The PDF is damaged: {len(failed_pages)} of its {page_count} pages could not "
            "be read and the others hold no text."
        )
    return NoTextFound(
        "The PDF has no text layer (it looks scanned); run OCR (e.g. ocrmypdf) and "
        "upload the result."
    )


def _open(data: bytes) -> tuple[PdfReader, bool]:
    """Open `data` and decrypt it with the empty user password when it is encrypted."""
    try:
        reader = PdfReader(BytesIO(data), strict=False)
        encrypted = reader.is_encrypted
    except _PARSE_ERRORS as exc:
        raise _unreadable(exc) from exc
    if not encrypted:
        return reader, False
    # Owner-password-only files (copy/print restrictions) open with the empty user password.
    try:
        opened = reader.decrypt("")
    except NotImplementedError as exc:
        raise EncryptedDocument(
            "The PDF is encrypted with a method that cannot be opened; upload an unencrypted copy."
        ) from exc
    except _PARSE_ERRORS as exc:
        raise _unreadable(exc) from exc
    if opened == PasswordType.NOT_DECRYPTED:
        raise EncryptedDocument("The PDF is password-protected; upload an unencrypted copy.")
    return reader, True


def _is_bomb(exc: BaseException) -> bool:
    """Tell whether pypdf gave up inflating a stream at its output limit.

    pypdf raises LimitReachedError for cycles and other structural limits too, so the message
    decides; should a later pypdf word it differently, bombs fall back to corrupt_document.
    """
    return isinstance(exc, LimitReachedError) and "decompressing" in str(exc)


def _unreadable(exc: BaseException) -> IngestError:
    """The error for a PDF pypdf could not read: a decompression bomb, or a damaged file."""
    if _is_bomb(exc):
        return DocumentTooLarge(
            "The PDF holds a compressed stream that inflates past the parser's limit per "
            "stream; it looks like a decompression bomb."
        )
    return CorruptDocument(_damaged(exc))


def _damaged(exc: BaseException) -> str:
    """Say in a sentence why pypdf could not read the file."""
    if isinstance(exc, RecursionError):
        detail = "its object structure is cyclic or nested too deeply"
    else:
        detail = str(exc).strip().rstrip(".")[:200] or type(exc).__name__
    return f"The PDF is damaged ({detail}) and cannot be read."


def _clean(text: str) -> str:
    """Drop control characters, expand ligature characters and collapse spaces in a line."""
    return _SPACES.sub(" ", text.translate(_TRANSLATION)).strip()


def _clean_lines(text: str, *, page_label: str, page_number: int) -> list[str]:
    """Split a page's text into clean lines; "" marks a blank line (a paragraph break)."""
    text = text.replace("\r\n", "\n").translate(_TRANSLATION)
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    # A page number alone on the first or last line is furniture, not text.
    for position in (-1, 0):
        if lines and lines[position] in (page_label, str(page_number)):
            lines.pop(position)
    return lines


def _page_blocks(lines: list[str], *, page: int, headings: list[tuple[str, int]]) -> list[Block]:
    """Turn one page's lines into heading and paragraph blocks."""
    placed: dict[int, list[Block]] = defaultdict(list)
    taken: set[int] = set()
    start = 0
    for title, level in headings:
        heading = Block(title, BlockKind.HEADING, level=level, page=page)
        found = _find_title(lines, title, start=start, taken=taken)
        if found is None:
            placed[-1].append(heading)
        else:
            placed[found.start].append(heading)
            taken.update(found)
            start = found.stop
    blocks = list(placed[-1])
    lengths = sorted(len(line) for line in lines if line)
    typical = lengths[int(len(lengths) * 0.8)] if lengths else 0
    segment: list[str] = []
    for position, line in enumerate(lines):
        if position in taken and position not in placed:
            continue  # the second line of a two-line heading
        if position in placed or not line:
            blocks.extend(_paragraphs(segment, typical, page))
            segment = []
            blocks.extend(placed.get(position, ()))
        else:
            segment.append(line)
    blocks.extend(_paragraphs(segment, typical, page))
    return blocks


def _find_title(lines: list[str], title: str, *, start: int, taken: set[int]) -> range | None:
    """Return the first one or two free lines from `start` that spell heading `title`."""
    key = _heading_key(title)
    if not key:
        return None
    for position in range(start, len(lines)):
        line = lines[position]
        if position in taken or not line or len(line) > 2 * len(title) + 12:
            continue
        line_key = _heading_key(line)
        if line_key == key:
            return range(position, position + 1)
        following = position + 1
        if key.startswith(line_key) and following < len(lines) and following not in taken:
            if _heading_key(f"{line} {lines[following]}") == key:
                return range(position, following + 1)
    return None


def _heading_key(text: str) -> str:
    """Reduce a heading to comparable letters: no numbering, case or punctuation."""
    folded = text.casefold()
    stripped = _NUMBERING.sub("", folded, count=1)
    key = "".join(ch for ch in stripped if ch.isalnum())
    return key or "".join(ch for ch in folded if ch.isalnum())


def _paragraphs(lines: list[str], typical: int, page: int) -> Iterator[Block]:
    """Group consecutive lines into paragraph blocks (see the module docstring)."""
    current: list[str] = []
    for position, line in enumerate(lines):
        short = len(line) < _SHORT_LINE_RATIO * typical
        if current and (_BULLET.match(line) or (short and _opens_title(current[-1], line))):
            yield Block(_join_lines(current), page=page)
            current = []
        current.append(line)
        following = lines[position + 1] if position + 1 < len(lines) else ""
        if following and short and not following[0].islower():
            yield Block(_join_lines(current), page=page)
            current = []
    if current:
        yield Block(_join_lines(current), page=page)


def _opens_title(previous: str, line: str) -> bool:
    """Tell whether short `line` after a finished sentence looks like a title of its own."""
    return previous[-1] in ".!?:" and not line[0].islower() and line[-1] not in ".,;:!?"


def _join_lines(lines: list[str]) -> str:
    """Join a paragraph's lines, mending hyphenated line breaks and CJK runs."""
    parts = [lines[0]]
    for line in lines[1:]:
        previous = parts[-1]
        if len(previous) >= 2 and previous[-1] == "-" and previous[-2].isalpha():
            if line[0].islower():
                if not _is_compound(previous.rsplit(" ", 1)[-1][:-1]):
                    parts[-1] = previous[:-1]
                parts.append(line)
                continue
        if _CJK.match(previous[-1]) and _CJK.match(line[0]):
            parts.append(line)
        else:
            parts.append(" " + line)
    return "".join(parts)


def _is_compound(fragment: str) -> bool:
    """Tell whether a word cut at a line-end hyphen keeps it ("d-", "BERT-", "state-of-the-")."""
    return (
        len(fragment) == 1
        or "-" in fragment
        or fragment[0].isdigit()
        or any(ch.isupper() or ch.isdigit() for ch in fragment[1:])
    )


def _outline_headings(reader: PdfReader, page_count: int) -> dict[int, list[tuple[str, int]]]:
    """Map 0-based page index to its outline entries (title, level), in outline order.

    A broken outline costs the headings, never the document.
    """
    by_page: dict[int, list[tuple[str, int]]] = defaultdict(list)
    try:
        stack: list[tuple[list[Any], int]] = [(list(reader.outline), 0)]
        while stack:
            items, depth = stack.pop()
            for position, item in enumerate(items):
                if isinstance(item, list):
                    stack.append((items[position + 1 :], depth))
                    stack.append((item, depth + 1))
                    break
                title = _clean(str(item.title or "")) if hasattr(item, "title") else ""
                page = reader.get_destination_page_number(item) if title else None
                if page is not None and 0 <= page < page_count:
                    by_page[page].append((title, min(depth + 1, 6)))
    except _PARSE_ERRORS:
        return by_page
    return by_page


def _page_labels(reader: PdfReader, page_count: int) -> list[str]:
    """Return each page's printed label (e.g. "xii"), or its number where that fails."""
    try:
        labels = reader.page_labels
    except _PARSE_ERRORS:
        labels = []
    if len(labels) != page_count:
        labels = [str(number) for number in range(1, page_count + 1)]
    return labels


def _fill_metadata(document: ExtractedDocument, reader: PdfReader) -> None:
    """Copy title, author, dates, producer and creator from the document information."""
    try:
        info = reader.metadata
    except _PARSE_ERRORS:
        return
    if info is None:
        return
    title = _info_text(info, "title")
    if title:
        title = _TITLE_PREFIX.sub("", title)
        if title.casefold() in _JUNK_TITLES or _FILE_NAME.match(title):
            title = None
    document.title = title or None
    document.author = _info_text(info, "author")
    document.created = _info_date(info, "creation_date")
    document.modified = _info_date(info, "modification_date")
    for name in ("producer", "creator"):
        value = _info_text(info, name)
        if value:
            document.extra[name] = value


def _info_text(info: Any, name: str) -> str | None:
    """Read one text entry of the document information, or None when absent or broken."""
    try:
        value = getattr(info, name)
    except _PARSE_ERRORS:
        return None
    if not isinstance(value, str):
        return None
    return _clean(value.replace("\n", " ")) or None


def _info_date(info: Any, name: str) -> datetime | None:
    """Read one date of the document information, or None when absent or malformed."""
    try:
        value = getattr(info, name)
    except _PARSE_ERRORS:
        return None
    return value if isinstance(value, datetime) else None
