"""Tables on scanned pages, from the word boxes Tesseract gives: rows as text aligned in
columns, the rule `pdf_aligned` applies to a text layer.

Tesseract keeps a table's row on one line when its cells stand level (its layout analysis
reads the wide gaps as spaces), but the line comes out as words, as prose does. Here a gap
between two words wider than `GAP` times the line's height parts cells, and a run of
`MIN_ROWS` lines (blank lines and a lone line between them aside) whose gaps line up with
nearby rows' is a table: each row becomes its cells joined by " | ", and the run's span of
lines is given so that the page's blocks keep it as one table. A ruled table whose rules
Tesseract reads as "|" words, or whose cells it drops (the corpus's
`table-multi-row-column-cells.png` loses its one-digit cells), keeps only what it reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from docingest.pipeline.extract.page_lines import clean
from docingest.pipeline.extract.pdf_aligned import MIN_ROWS, NEAR, gaps_line_up

GAP = 0.9
"""A gap between two words wider than this share of the line's height (ascender to
descender, about the type size) parts two cells; a space of prose is about 0.5."""

Box = tuple[int, int, int, int]
"""A word's box in image pixels: left, top, right, bottom."""


@dataclass(frozen=True, slots=True)
class LaidOutText:
    """A page's OCR lines ("" between paragraphs), table rows as cells joined by " | ", and
    the spans `(first, end)` of lines that are tables."""

    lines: list[str]
    tables: tuple[tuple[int, int], ...]

    def blocks_lines(self) -> tuple[list[str], frozenset[int]]:
        """The lines with each table as one line (its rows on lines of its text) and the
        positions of those, as `page_lines.page_blocks` takes them."""
        merged: list[str] = []
        tables: set[int] = set()
        position = 0
        for first, end in self.tables:
            merged += self.lines[position:first]
            tables.add(len(merged))
            merged.append("\n".join(self.lines[first:end]))
            position = end
        merged += self.lines[position:]
        return merged, frozenset(tables)


def lay_out(lines: list[list[tuple[str, Box]]]) -> LaidOutText:
    """Lay out recognised lines of (word, box), an empty line between paragraphs."""
    rows = [_cells(line) for line in lines]
    spoken = [n for n, row in enumerate(rows) if row is not None and row[0]]  # lines with gaps
    found: list[tuple[int, int]] = []  # (first, last) line numbers of each table
    start = 0
    while start < len(spoken):
        end = start + 1
        while end < len(spoken) and _blank_between(rows, spoken[end - 1], spoken[end]):
            end += 1
        run = spoken[start:end]
        gaps = [_gaps(rows[n]) for n in run]
        aligned = [
            k for k in range(len(run))
            if gaps_line_up(gaps[k], gaps[max(k - NEAR, 0) : k] + gaps[k + 1 : k + 1 + NEAR])
        ]  # fmt: skip
        if len(aligned) >= MIN_ROWS:
            found.append((run[aligned[0]], run[aligned[-1]]))
        start = end
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    position = 0
    for first, last in found:
        out += [_plain(line) for line in lines[position:first]]
        table_start = len(out)
        for row in rows[first : last + 1]:
            if row is not None:  # blank lines inside the table leave it
                out.append(" | ".join(row[1]))
        spans.append((table_start, len(out)))
        position = last + 1
    out += [_plain(line) for line in lines[position:]]
    return LaidOutText(out, tuple(spans))


def _plain(line: list[tuple[str, Box]]) -> str:
    return " ".join(word for word, _ in line)


_Cells = tuple[list[tuple[float, float]], list[str]]


def _cells(line: list[tuple[str, Box]]) -> _Cells | None:
    """The line's wide gaps and its cells; None for a blank line."""
    if not line:
        return None
    height = max(box[3] for _, box in line) - min(box[1] for _, box in line)
    gaps: list[tuple[float, float]] = []
    cells: list[list[str]] = [[line[0][0]]]
    for (_, before), (word, after) in zip(line, line[1:], strict=False):
        if after[0] - before[2] > GAP * height:
            gaps.append((float(before[2]), float(after[0])))
            cells.append([])
        cells[-1].append(word)
    return gaps, [clean(" ".join(cell)) for cell in cells]


def _gaps(row: _Cells | None) -> list[tuple[float, float]]:
    return row[0] if row is not None else []


def _blank_between(rows: list[_Cells | None], before: int, after: int) -> bool:
    """Whether only blank lines, and at most one line without a wide gap (the second line
    of a cell, or a rule read as "|"), stand between lines `before` and `after`."""
    return sum(row is not None for row in rows[before + 1 : after]) <= 1
