"""Turn one page's text lines into heading and paragraph blocks (PDF text layers and OCR).

Both PDFium and Tesseract give one line per printed line and seldom a blank line, so a
paragraph ends after a line noticeably shorter than the page's usual line (unless the next
line starts in lower case: the sentence goes on), before a bulleted line, before a short
unpunctuated line after a finished sentence (a title such as "4 Experimental Setup"), at a
blank line and at a heading. Lines are joined with spaces; "infor-" + "mation" becomes
"information" when a letter and a hyphen end the line and a lower-case letter starts the
next, unless the cut word looks like a compound's head and keeps its hyphen: one letter
("d-dimensional"), a hyphen already ("state-of-the-art"), digits or inner capitals
("BERT-based"). A plain word such as "well-" + "known" loses its hyphen: the rule's cost.

Headings come from the PDF outline: each entry becomes a heading on its destination page, in
place of the line (or two) that spells its title, or before the page's first block when none
does. Without an outline they come from typography (`pdf_headings`), as lines marked
headings; footnotes (`pdf_layout`) follow the page's last block, each a block of its own.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Container, Iterable, Iterator

from docingest.pipeline.document import Block, BlockKind

_SHORT_LINE_RATIO = 0.75
"""A line shorter than this share of the page's usual line length may end a paragraph."""

_LIGATURES = {code: unicodedata.normalize("NFKC", chr(code)) for code in range(0xFB00, 0xFB07)}
_CONTROLS: dict[int, str | None] = dict.fromkeys([*range(0, 9), *range(11, 32), *range(127, 160)])
_WIDE_SPACES: dict[int, str] = dict.fromkeys([0xA0, *range(0x2000, 0x200B), 0x3000], " ")
_TRANSLATION = str.maketrans(
    {**_CONTROLS, **_LIGATURES, **_WIDE_SPACES, 0x09: " ", 0x0D: "\n", 0xFFFD: None}
)

_SPACES = re.compile(r"[ \u00a0\u2000-\u200a\u3000]+")
_SPACE_RUNS = re.compile(" {2,}")
_BULLET = re.compile(r"^[•◦▪●○■□►➢\uf0a7\uf0b7]")
_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
_NUMBERING = re.compile(
    r"^(?:(?:chapter|section|part|appendix)\s+)?"
    r"(?:\d+|[ivxlcdm]+|[a-z])(?:[.\-]\w+)*[.):]?\s+",
    re.IGNORECASE,
)

Heading = tuple[str, int]
"""An outline entry placed on a page: (title, level), level 1 at the top."""

MarkedHeadings = dict[int, tuple[str, int, int]]
"""Headings found on a page's lines: first line → (title, level, lines it spans)."""


def clean(text: str) -> str:
    """Drop control characters, expand ligature characters and collapse spaces in a line."""
    # Printable ASCII needs no translation, and most lines have no run of spaces: the two
    # checks halve the cost of a PDF page's lines (BENCHMARKS.md, "PDF structure").
    if not (text.isascii() and text.isprintable()):
        text = text.translate(_TRANSLATION)  # wide spaces become " " here
    if "  " in text:
        text = _SPACE_RUNS.sub(" ", text)
    return text.strip()


def join_cell(parts: Iterable[str], *, run_on: Container[int] = ()) -> str:
    """A table cell's wrapped lines (or runs of text) as one line, spaced; a line ending in a
    slash runs on without one (a path or an address wrapped where it may break:
    "/etc/" + "passwd"), as do the parts at `run_on` (their positions: a word the cell's
    width broke, `pdf_broken_words`)."""
    joined, glue = "", False
    for position, part in enumerate(parts):
        tidy = clean(part)
        if tidy:
            glue = glue or position in run_on
            joined = joined + tidy if glue or not joined else f"{joined} {tidy}"
            # "a /" is an operator standing apart and "/etc/ " a line ending with a space
            glue = len(part) > 1 and part[-1] == "/" and not part[-2].isspace()
    return joined


def clean_lines(text: str, *, page_label: str, page_number: int) -> list[str]:
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


def page_blocks(
    lines: list[str],
    *,
    page: int,
    headings: list[Heading],
    marked: MarkedHeadings | None = None,
    footnotes: list[str] | None = None,
    tables: frozenset[int] = frozenset(),
) -> list[Block]:
    """Turn one page's lines into heading and paragraph blocks, footnotes last; the lines at
    `tables` are whole tables (rows on lines), each a table block."""
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
    for position, (title, level, span) in (marked or {}).items():
        lines_spanned = range(position, position + span)
        if not taken.intersection(lines_spanned):  # an outline entry's line is not twice
            placed[position].append(Block(title, BlockKind.HEADING, level=level, page=page))
            taken.update(lines_spanned)
    blocks = list(placed[-1])
    lengths = sorted(len(line) for i, line in enumerate(lines) if line and i not in tables)
    typical = lengths[int(len(lengths) * 0.8)] if lengths else 0
    segment: list[str] = []
    for position, line in enumerate(lines):
        if position in taken and position not in placed:
            continue  # the second line of a two-line heading
        if position in placed or position in tables or not line:
            blocks.extend(_paragraphs(segment, typical, page))
            segment = []
            blocks.extend(placed.get(position, ()))
            if position in tables:
                blocks.append(Block(line, BlockKind.TABLE, page=page))
        else:
            segment.append(line)
    blocks.extend(_paragraphs(segment, typical, page))
    blocks.extend(Block(note, page=page) for note in footnotes or ())
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
                if not is_compound(previous.rsplit(" ", 1)[-1][:-1]):
                    parts[-1] = previous[:-1]
                parts.append(line)
                continue
        if _CJK.match(previous[-1]) and _CJK.match(line[0]):
            parts.append(line)
        else:
            parts.append(" " + line)
    return "".join(parts)


def is_compound(fragment: str) -> bool:
    """Tell whether a word cut at a line-end hyphen keeps it ("d-", "BERT-", "state-of-the-")."""
    return (
        not fragment
        or len(fragment) == 1
        or "-" in fragment
        or fragment[0].isdigit()
        or any(ch.isupper() or ch.isdigit() for ch in fragment[1:])
    )
