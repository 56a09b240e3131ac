"""Lines set off by drawn rules: a short line with a rule just above and just below it, and
space beyond both rules, as the R reference manual sets each topic's name (in body type, so
typography alone cannot tell it from the text; BENCHMARKS.md, "PDF structure").

The page's objects are walked only on a page that has a candidate (a short line in about
the page's usual size, not bold, with space above and below it): most pages have none, and a
walk costs two PDFium calls per object.
A rule is a path object at most `RULE_HEIGHT` high, within `REACH` type sizes of the line
and spanning it. A table's rows have rules too, but text just beyond them: hence the space
asked for beyond each rule. A filled box is not a rule: one-line code samples are set in
shaded boxes.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pypdfium2 as pdfium

from docingest.pipeline.extract.pdf_lines import PdfLine
from docingest.pipeline.extract.pdf_paths import path_bounds

RULE_HEIGHT = 3.0
"""A path this high or less (points) is a horizontal rule."""

REACH = 2.5
"""A rule belongs to a line when it lies within this many type sizes of it."""

MAX_CHARS = 120


def mark_ruled(page: pdfium.PdfPage, lines: list[PdfLine]) -> list[PdfLine]:
    """Return `lines` with `ruled` set on each line boxed by rules (see the module docstring)."""
    texts = [line for line in lines if line.styled and line.text]
    sizes: Counter[float] = Counter()
    for line in texts:
        sizes[line.size] += len(line.text)
    usual = sizes.most_common(1)[0][0] if sizes else 0.0
    candidates = [  # in the body's type: larger or bold lines tell by typography already
        position
        for position, line in enumerate(lines)
        if line.styled
        and not line.bold
        and abs(line.size - usual) <= 0.15 * usual  # a page of code in smaller type
        and 2 <= len(line.text) <= MAX_CHARS
        and _spaced(lines, position)
    ]
    if not candidates:
        return lines
    rules = path_bounds(page)
    if not rules:
        return lines
    marked = list(lines)
    for position in candidates:
        line = lines[position]
        if _boxed(line, rules, texts):
            marked[position] = dataclasses.replace(line, ruled=True)
    return marked


def _spaced(lines: list[PdfLine], position: int) -> bool:
    """Whether the lines before and after it in the stream (if any) stand two type sizes
    away or more: a cheap first look, `_clear` looks at the whole page."""
    line = lines[position]
    room = 2 * line.size
    for step in (-1, 1):
        other = position + step
        while 0 <= other < len(lines) and not lines[other].text:
            other += step
        if 0 <= other < len(lines) and lines[other].styled:
            near = lines[other]
            if (step < 0 and near.bottom < line.top + room) or (
                step > 0 and near.top > line.bottom - room
            ):
                return False
    return True


def _boxed(
    line: PdfLine, rules: list[tuple[float, float, float, float]], texts: list[PdfLine]
) -> bool:
    reach = REACH * line.size
    above = below = False
    for left, bottom, right, top in rules:
        if left > line.left + line.size or right < line.right - line.size:
            continue  # does not span the line
        if top - bottom > RULE_HEIGHT:
            continue
        if line.top <= bottom <= line.top + reach and _clear(line, texts, bottom, 1):
            above = True
        elif line.bottom - reach <= top <= line.bottom and _clear(line, texts, top, -1):
            below = True
    return above and below


def _clear(line: PdfLine, texts: list[PdfLine], edge: float, direction: int) -> bool:
    """Whether no text stands within one type size beyond `edge` (up or down), over the line."""
    room = line.size
    for other in texts:
        if other is line or other.right < line.left or other.left > line.right:
            continue
        if direction > 0 and other.bottom < edge + room and other.top > edge:
            return False
        if direction < 0 and other.top > edge - room and other.bottom < edge:
            return False
    return True
