"""A PDF's page furniture and footnotes, found from the lines' place across pages.

Running heads and feet: a line in the top or bottom band of its page (`BAND` of the height)
whose text, digits aside ("Page 3", "Chapter 2 · 17"), stands in the same band on at least
`REPEATS` other pages within `WINDOW` pages either side is furniture and leaves the text, as
does a lone page number in a band. Pages are held `WINDOW` pages back to look ahead; the
stream of blocks lags by that many pages, never by the whole document.

Footnotes: at the end of a column (the next line, in the content stream's order, starts higher
up, or the page ends), a run of lines in smaller type than the body, in the lower half of the
page, whose first line opens with a marker ("6We use…", "* Equal contribution") leaves the
flow and becomes a block of its own at the end of its page, so it never lands inside the
sentence that goes on in the next column.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from docingest.pipeline.extract.pdf_lines import PdfLine

BAND = 0.1
"""Share of the page height, top and bottom, where running heads and feet stand."""

WINDOW = 4
"""Pages looked at either side for a running head's repeats (and the stream's lag)."""

REPEATS = 2
"""Other pages within the window that must repeat a line for it to be furniture."""

_FOOTNOTE_RATIO = 0.92
_FOOTNOTE_MARKER = re.compile(r"^(?:\d{1,3}|[*†‡§¶])\s?[^\W\d_(\[]")
_PAGE_NUMBER = re.compile(
    r"^(?:page\s+)?(?:\d{1,5}|[ivxlcdm]{1,8})(?:\s*(?:of|/)\s*\d{1,5})?$", re.IGNORECASE
)
_DIGITS = re.compile(r"\d+")


@dataclass(slots=True)
class PdfPage:
    """A page read but not yet given out: its lines and height (0 when unknown)."""

    index: int
    lines: list[PdfLine]
    height: float
    bands: list[tuple[int, str]] = field(default_factory=list)  # (position, band key)
    body_size: float = 0.0


@dataclass(frozen=True, slots=True)
class LaidOutPage:
    """A page's flowing lines (blank ones are paragraph breaks) and its footnotes."""

    index: int
    lines: list[PdfLine]
    footnotes: list[str]


class FurnitureFilter:
    """Holds pages `WINDOW` back, and gives them out without furniture and footnotes."""

    def __init__(self) -> None:
        self._held: deque[PdfPage] = deque()
        self._keys: list[set[str]] = []  # every page's band keys so far
        self._sizes: Counter[float] = Counter()  # characters by font size, the whole document

    def add(self, page: PdfPage) -> Iterator[LaidOutPage]:
        """Take the next page; yield the pages now far enough back to lay out."""
        page.bands = list(_band_keys(page))
        self._keys.append({key for _, key in page.bands})
        sizes = self._sizes
        for line in page.lines:
            if line.size > 0:  # `styled`, without a property call a line
                sizes[line.size] += len(line.text)
        self._held.append(page)
        while self._held and self._held[0].index + WINDOW < page.index + 1:
            yield self._lay_out(self._held.popleft())

    def finish(self) -> Iterator[LaidOutPage]:
        """Yield the pages still held."""
        while self._held:
            yield self._lay_out(self._held.popleft())

    @property
    def body_size(self) -> float:
        """The font size most of the text so far is set in (0 when unknown)."""
        return self._sizes.most_common(1)[0][0] if self._sizes else 0.0

    def _lay_out(self, page: PdfPage) -> LaidOutPage:
        low, high = max(page.index - WINDOW, 0), min(page.index + WINDOW + 1, len(self._keys))
        seen: Counter[str] = Counter()
        for other in range(low, high):
            if other != page.index:
                seen.update(self._keys[other])
        drop = {
            position
            for position, key in page.bands
            if seen[key] >= REPEATS or _PAGE_NUMBER.match(page.lines[position].text)
        }
        lines = page.lines
        if drop:
            lines = [line for position, line in enumerate(lines) if position not in drop]
        lines, footnotes = _take_footnotes(lines, self.body_size, page.height)
        return LaidOutPage(page.index, _trim_blank(lines), footnotes)


def _band_keys(page: PdfPage) -> Iterator[tuple[int, str]]:
    """Yield (position, key) of the page's lines in its top or bottom band."""
    if page.height <= 0:
        return
    top_edge, bottom_edge = page.height * (1 - BAND), page.height * BAND
    for position, line in enumerate(page.lines):
        if line.size <= 0 or not line.text:  # not `styled`: a property call a line (CPU)
            continue
        if line.bottom >= top_edge:
            band = "top"
        elif line.top <= bottom_edge:
            band = "bottom"
        else:
            continue
        text = line.text if line.text.strip("0123456789 ") else "#"
        yield position, f"{band}:{_DIGITS.sub('#', text.casefold())}"


def _take_footnotes(
    lines: list[PdfLine], body_size: float, height: float
) -> tuple[list[PdfLine], list[str]]:
    """Split the footnote runs (see the module docstring) off the flowing lines."""
    if body_size <= 0 or height <= 0:
        return lines, []
    limit = body_size * _FOOTNOTE_RATIO
    if not any(0 < line.size <= limit for line in lines):
        return lines, []  # no small type: no footnote (most pages; CPU, BENCHMARKS.md)
    kept: list[PdfLine] = []
    notes: list[list[str]] = []
    position = 0
    while position < len(lines):
        end = _footnote_run(lines, position, limit, height)
        if end is None:
            kept.append(lines[position])
            position += 1
            continue
        for line in lines[position:end]:
            if not line.text:
                continue
            if _FOOTNOTE_MARKER.match(line.text) or not notes:
                notes.append([line.text])
            else:
                notes[-1].append(line.text)
        position = end
    return kept, [" ".join(note) for note in notes]


def _footnote_run(lines: list[PdfLine], start: int, limit: float, height: float) -> int | None:
    """Return the end of the footnote run opening at `start`, if one does."""
    first = lines[start]
    if not (first.styled and first.size <= limit and first.top < height / 2):
        return None
    if not _FOOTNOTE_MARKER.match(first.text):
        return None
    end, previous = start + 1, first
    while end < len(lines):
        line = lines[end]
        if line.text and not (line.styled and line.size <= limit and line.top < previous.top):
            break
        previous = line if line.text else previous
        end += 1
    following = next((line for line in lines[end:] if line.text), None)
    if following is not None and following.styled and following.top <= previous.top:
        return None  # body text goes on below: not the end of a column
    return end


def _trim_blank(lines: list[PdfLine]) -> list[PdfLine]:
    start, end = 0, len(lines)
    while start < end and not lines[start].text:
        start += 1
    while end > start and not lines[end - 1].text:
        end -= 1
    return lines[start:end]
