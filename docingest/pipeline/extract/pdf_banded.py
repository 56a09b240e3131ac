"""Tables of untagged PDFs ruled across only: horizontal rules of one span part the rows
(Chromium's `border-bottom` tables, Word's and the SEC filings' statements), the columns
are the x-gaps left empty by the characters of every band between them.

Each band between two consecutive rules of a similar span is a row; a gap wider than `GAP`
type sizes that no word of the run's bands covers parts two columns. The grid this gives
(rules' y, gaps' middles) is filled by `pdf_ruled` as a drawn one is, so a cell that wraps
stays in its row, which alignment (`pdf_aligned`) cannot do. A band whose text covers every
gap ends the run: a page of prose with separators, a rule under a heading, a footnote rule
give no grid (one column, or one rule). The row above the first rule (a `border-bottom`
table's header) joins when its words keep out of the gaps.

Cost: only pages with three horizontal rules reach this (`pdf_ruled`'s early exits); the
box of a word's first and last character are read, `MAX_WORDS` words per page at most.
Written here for the reason `pdf_aligned` gives.
"""

from __future__ import annotations

import ctypes
import re
from bisect import bisect_right
from collections.abc import Iterator
from statistics import median

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from docingest.pipeline.extract.pdf_calls import loose_char_box
from docingest.pipeline.extract.pdf_lines import PdfLine

GAP = 0.8
"""A gap this many type sizes wide, empty in every band, parts two columns (as `pdf_aligned`)."""

SPAN = 0.05
"""Share of a rule's width by which the ends of rules of one table may differ."""

MAX_WORDS = 20_000
"""Words measured per page at most (a page of tiny text objects stays lines)."""

_ABOVE = 2
"""Bands of the table's usual height above its first rule looked at (a header row)."""

_Rule = tuple[float, float, float]
"""A horizontal rule: (y, x0, x1)."""

_Span = tuple[float, float]

_WORD = re.compile(r"\S+")

_Band = tuple[float, float, list[_Span], float]
"""Between two rules: top, bottom, its words' x-extents, its largest type size."""


class _Words:
    """The x-extent of each word of a line, read from PDFium's character boxes."""

    def __init__(self, textpage: pdfium.PdfTextPage, text: str) -> None:
        self.raw, self.text, self.box = textpage.raw, text, pdfium_c.FS_RECTF()
        self.box_ref = ctypes.byref(self.box)
        self.left = MAX_WORDS

    def of(self, line: PdfLine) -> list[_Span] | None:
        text, start = self.text, line.start
        end = text.find("\r\n", start)
        end = len(text) if end < 0 else end
        spans: list[_Span] = []
        raw, box, box_ref = self.raw, self.box, self.box_ref
        for word in _WORD.finditer(text, start, end):  # not a step a character (CPU)
            self.left -= 1
            if self.left < 0:
                return None
            loose_char_box(raw, word.start(), box_ref)
            left = box.left
            loose_char_box(raw, word.end() - 1, box_ref)
            spans.append((left, box.right))
        return spans


def banded_grids(
    across: list[_Rule], textpage: pdfium.PdfTextPage, text: str, lines: list[PdfLine]
) -> Iterator[tuple[list[float], list[float]]]:
    """The grids (rows' y top down, columns' x left to right) that the horizontal rules
    `across` and the gaps between the words of `lines` make."""
    words = _Words(textpage, text)
    candidates = [line for line in lines if line.styled and not line.table and line.start >= 0]
    for group in _groups(across):
        x0, x1 = min(rule[1] for rule in group), max(rule[2] for rule in group)
        inside = [line for line in candidates if x0 - 2 < (line.left + line.right) / 2 < x1 + 2]
        edges = [-rule[0] for rule in group]  # ascending
        placed: list[list[PdfLine]] = [[] for _ in group[1:]]
        for line in inside:  # each line to the band holding its centre
            band = bisect_right(edges, -(line.top + line.bottom) / 2) - 1
            if 0 <= band < len(placed):
                placed[band].append(line)
        bands: list[_Band] = []
        for upper, lower, held in zip(group, group[1:], placed, strict=False):
            spans = []
            for line in held:
                found = words.of(line)
                if found is None:
                    return
                spans += found
            size = max((line.size for line in held), default=0.0)
            bands.append((upper[0], lower[0], spans, size))
        for run, gaps in _runs(bands, x0, x1):
            ys = [run[0][0], *(band[1] for band in run)]
            height = median(top - bottom for top, bottom, spans, _ in run if spans)
            for _ in range(_ABOVE):  # a header row above the first rule, if it fits
                top = _above(ys[0], ys[0] + height, inside, words, gaps, (x0, x1))
                if top is None:
                    break
                ys.insert(0, top)
            yield ys, [x0, *((a + b) / 2 for a, b in gaps), x1]


def _above(
    low: float,
    high: float,
    lines: list[PdfLine],
    words: _Words,
    gaps: list[_Span],
    span: _Span,
) -> float | None:
    """The top of a row between `low` and `high` made of the lines nearest `low` whose
    words keep out of the columns' edges (None when there is none): a rule's y."""
    top = None
    window = [line for line in lines if low < (line.top + line.bottom) / 2 < high]
    for line in sorted(window, key=lambda line: line.top + line.bottom):
        if any(_covers(found, gaps, *span) for found in words.of(line) or [(-1e9, 1e9)]):
            return None if top is None else min(high, line.bottom)
        top = high
    return top


def _groups(across: list[_Rule]) -> Iterator[list[_Rule]]:
    """Runs of at least three consecutive rules (top down) of a similar span."""
    rules = sorted(across, key=lambda rule: -rule[0])
    group: list[_Rule] = []
    for rule in rules:
        if group:
            tolerance = SPAN * (group[0][2] - group[0][1])
            if abs(rule[1] - group[0][1]) > tolerance or abs(rule[2] - group[0][2]) > tolerance:
                if len(group) >= 3:
                    yield group
                group = []
        group.append(rule)
    if len(group) >= 3:
        yield group


def _runs(bands: list[_Band], x0: float, x1: float) -> Iterator[tuple[list[_Band], list[_Span]]]:
    """Stretches of at least two bands with text whose words leave a column gap empty in
    all, and those gaps. The words seen so far are kept merged (the columns' extents), so
    each band costs its words, not the run's."""
    run: list[_Band] = []
    filled: list[_Span] = []  # the run's words, merged where closer than a gap
    for band in bands:
        size = max([band[3], *(b[3] for b in run)]) or 10.0
        joined = _merge([*filled, *band[2]], GAP * size)
        if run and not _inner(joined, x0, x1):
            if sum(1 for b in run if b[2]) >= 2:
                yield run, _gaps(filled, x0, x1)
            joined = _merge(band[2], GAP * (band[3] or 10.0))
            run, filled = ([band], joined) if _inner(joined, x0, x1) else ([], [])
        elif run or _inner(joined, x0, x1):
            run, filled = [*run, band], joined
    if sum(1 for b in run if b[2]) >= 2:
        yield run, _gaps(filled, x0, x1)


def _merge(spans: list[_Span], gap: float) -> list[_Span]:
    """`spans` sorted, those closer than `gap` joined."""
    merged: list[list[float]] = []
    for left, right in sorted(spans):
        if merged and left - merged[-1][1] <= gap:
            merged[-1][1] = max(merged[-1][1], right)
        else:
            merged.append([left, right])
    return [(left, right) for left, right in merged]


def _inner(filled: list[_Span], x0: float, x1: float) -> bool:
    """Whether merged words leave a gap between two of them within the table."""
    return bool(_gaps(filled, x0, x1))


def _gaps(filled: list[_Span], x0: float, x1: float) -> list[_Span]:
    """The gaps between merged words, within x0..x1."""
    return [
        (a[1], b[0]) for a, b in zip(filled, filled[1:], strict=False) if x0 < a[1] and b[0] < x1
    ]


def _covers(span: _Span, gaps: list[_Span], x0: float, x1: float) -> bool:
    """Whether a word crosses the middle of one of the gaps (a column's edge) or stands
    outside the table."""
    left, right = span
    return left < x0 - 2 or right > x1 + 2 or any(left < (a + b) / 2 < right for a, b in gaps)
