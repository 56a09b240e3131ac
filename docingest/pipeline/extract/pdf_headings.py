"""Headings of a PDF without an outline, from typography: which lines are headings, at what level.

A line is a heading when it reads like a title (`pdf_heading_text`: short, a letter in it or a
release's number "0.13.8", no sentence or clause end, "!" or ":" only in larger type, not a
caption "Figure 3:", not a contents line with leaders or a page number, nor any line of a page
after its `CONTENTS_LINES`th such line's first) and stands apart from the body text (the page's
own where a page of text is set in a second, larger body size: press clippings): larger type,
or bold where the body is not (and not opening in lower case, as a bold cross-reference does,
unless a name of three words or fewer, in another family than the text under it, set apart by
space above and below: a column's "span_name" in code type), or a section number ("3.1", "IV.",
"A.2", "Chapter 4") set in capitals, italics or larger, or (numbered or a half point larger) in
another family than the page's text with space below it ("2.1. Methods", "References" in the
sans of a serif paper), or drawn rules boxing it in (`PdfLine.ruled`, the R manual's topics:
body type, so only the rules tell). A style that sets a large share of the document's text is
body, not heading (a PDF whose every line is bold has no bold headings). A heading that repeats
the one before it, or says it is continued ("Exhibit 2-14 (Cont. 2)"), is a continued section's
banner, not a new heading. It stands alone: the next line does not carry on its sentence in
lower case, unless set apart from it by space.

Lines of one style with no space between are one block: a heading wrapped over lines
("CHAPTER 3 - ADMINISTRATION OF CHAPTER 13" / "CASES", a comma or number at a line's end
then allowed), and a run whose block goes on into a line that reads like no title (a
sentence's end) is the start of an emphasised paragraph, no heading. A run of more than
`MAX_HEADING_LINES` lines is an emphasised paragraph too (a bold abstract), unless it is
headings stacked one under the other, each short and set apart by space in the smaller
type's measure or by a change of size (a title, its subtitle, a first heading; a section
name, a dateline, an article's title); "Chapter 4" followed by its title is one heading.

Levels: a section number gives its depth ("3" → 1, "3.1" → 2, roman numerals 1, a letter
under roman numerals 2, "Chapter" 1); an unnumbered heading takes the level its style had
when numbered, else its rank by size (bold above regular) among the heading styles seen so
far (ruled above bold above regular at one size; styles of the first page, a title page's,
left out). A style keeps the level it first got, so levels stay consistent across the
document (a larger style seen only later shares level 1 rather than renumber what was given
out); after a "Part", every heading is one level further down.

Not headings either: admonition labels ("Note", "Tip", "Warning") unless in larger type
("Notes"), bulleted lines, short capitals in type smaller than the body's by `_SMALLER`
(a form's "PAY TO THE", not a small-capitals font's "References"), lines set upright in
the margin (arXiv's stamp), bold names centred right under the line before (a class
in a diagram's box), and lines whose words stand in columns far apart (a table's
header row, `PdfLine.columnar`; a section number's tab stop parts no columns). Figures:
BENCHMARKS.md, "PDF structure".
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from docingest.pipeline.extract.pdf_heading_text import (
    CHAPTER,
    LEADERS,
    LETTERED,
    RELEASE,
    ROMAN,
    numbering,
    reads_like_title,
)
from docingest.pipeline.extract.pdf_lines import PdfLine

MAX_HEADING_LINES = 3
LARGER = 1.12
"""A heading's type is at least this much larger than the body's, unless bold or numbered."""
PAGE_BODY_CHARS = 400
PAGE_BODY_SHARE = 0.15
"""A page's own most common style is its body when larger than the document's, setting at
least half the page, this many characters, and this share of the document's text."""
_CENTRED = 2.0
"""Points off another line's middle or left edge that still count as aligned with it."""
_SMALLER = 0.8
"""Capitals in type smaller than this share of the body's are a form's or a figure's labels."""
BODY_SHARE = 0.35
"""A style setting more than this share of the text so far is body text, not headings."""

CONTENTS_LINES = 5
"""Lines with leaders or glued page numbers that make a page a table of contents: no heading
on it after the first of them (its entries are set like headings)."""
_PAGE_ENDS = frozenset("0123456789ixvlcIXVLC")
_CAPS_WORDS = 5
_SMALL_CAPS = re.compile(r"caps|^cmcsc|smallcap|\bsc\b", re.IGNORECASE)  # a small-capitals font
_CODE = re.compile(r"^[$#>%]\s|[;{}=<>]|\(\)")
"""A shell prompt, code punctuation: a one-line code sample between rules."""
_NUMBER_PREFIX = re.compile(r"^(?:[\dIVX]+|[A-Z](?=[.\-]))(?:[.\-–]\w+)*[.):]?\s+")
_CONTINUED = re.compile(r"\((?:cont(?:inued|'d|\.)|suite)|\bcontinued\)?$", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]{2}")
_APART = 0.6
"""Space below a line, in type sizes, that sets it apart from the text after it (a line's
leading leaves ~0.2)."""


@dataclass(frozen=True, slots=True)
class BodyStyle:
    """The typography most of the document's text is set in."""

    size: float
    bold: bool
    family: str = ""


Style = tuple[float, bool, bool, bool]
"""Size (to half a point), bold, italic, boxed by rules."""


@dataclass(slots=True)
class HeadingFinder:
    """Finds headings page by page, keeping each style's level across the document."""

    style_chars: Counter[Style] = field(default_factory=Counter)
    _numbered: dict[Style, Counter[int]] = field(default_factory=dict)
    _levels: dict[Style, int] = field(default_factory=dict)
    _tiers: set[tuple[float, int]] = field(default_factory=set)  # (size, weight) of headings
    _numbered_tiers: set[tuple[float, int]] = field(default_factory=set)
    _pages: int = 0
    _roman_seen: bool = False
    _part_seen: bool = False
    _last_title: str = ""

    def count(self, lines: list[PdfLine]) -> None:
        """Count the characters set in each style (read ahead of `find`)."""
        for line in lines:
            if line.styled and line.text:
                self.style_chars[_style(line)] += len(line.text)

    def body(self) -> BodyStyle | None:
        if not self.style_chars:
            return None
        (size, bold, _, _), _ = self.style_chars.most_common(1)[0]
        return BodyStyle(size, bold)

    def find(self, lines: list[PdfLine]) -> dict[int, tuple[str, int, int]]:
        """Map each heading's first line to (title, level, lines it spans)."""
        body = self.body()
        if body is None:
            return {}
        total = sum(self.style_chars.values())
        body = self._page_body(lines, body, total)
        self._pages += 1
        entries = [  # the regex only where a page number could end the line (CPU)
            i
            for i, line in enumerate(lines)
            if line.text[-1:] in _PAGE_ENDS and LEADERS.search(line.text)
        ]
        last = entries[0] if len(entries) >= CONTENTS_LINES else len(lines)
        marks = [self._is_heading(lines, i, body, total) for i in range(last)]
        marks += [False] * (len(lines) - last)
        found: dict[int, tuple[str, int, int]] = {}
        position = 0
        while position < len(lines):
            if not marks[position]:
                position += 1
                continue
            end = position + 1
            while end < len(lines) and marks[end]:
                end += 1
            end = _wrapped_end(lines, end)
            if end < 0:
                position = -end  # the first lines of a paragraph in heading type
                continue
            pieces = _split_run(lines, position, end)
            if end - position > MAX_HEADING_LINES and not _stacked(lines, pieces):
                position = end  # an emphasised paragraph
                continue
            for start, stop in pieces:
                title = " ".join(line.text for line in lines[start:stop])
                found[start] = (title, 0, stop - start)
                if self._pages > 1:  # not the title page's styles, set there only
                    self._tiers.add(_tier(_style(lines[start])))
            position = end
        result: dict[int, tuple[str, int, int]] = {}
        for start, (title, _, span) in found.items():  # the page's heading styles all known
            unnumbered = (  # a release's number is its title ("0.52.0 (January 18, 2026)")
                title if RELEASE.fullmatch(title) else _NUMBER_PREFIX.sub("", title, count=1)
            ).casefold()
            if unnumbered == self._last_title or _continued(lines, start, span):
                continue  # the banner of a section (an exhibit) continued from the page before
            self._last_title = unnumbered
            result[start] = (title, self._level(title, lines[start]), span)
        return result

    def _page_body(self, lines: list[PdfLine], body: BodyStyle, total: int) -> BodyStyle:
        """The body style on this page: the page's own family (a paper's body may change
        family in its appendix), and its own larger type where a page of text is set in a
        second body style (clippings of 12-point articles among 9-point ones), whose lines
        are no larger than their neighbours'."""
        families: Counter[str] = Counter()
        styles: Counter[Style] = Counter()
        for line in lines:
            if line.styled:
                families[line.family] += len(line.text)
                styles[_style(line)] += len(line.text)
        if not families:
            return body
        family = families.most_common(1)[0][0]
        style, chars = styles.most_common(1)[0]
        if (
            style[0] > body.size
            and chars >= PAGE_BODY_CHARS
            and 2 * chars >= sum(styles.values())
            and self.style_chars[style] >= PAGE_BODY_SHARE * total
        ):
            return BodyStyle(style[0], style[1], family)
        return BodyStyle(body.size, body.bold, family)

    def _is_heading(self, lines: list[PdfLine], i: int, body: BodyStyle, total: int) -> bool:
        line = lines[i]
        text = line.text
        if not line.styled or (line.columnar and not line.ruled):
            return False
        if line.top - line.bottom > 2 * max(line.right - line.left, line.size):
            return False  # set upright in the margin ("arXiv:1601.03642v1 [cs.CV] 12 Jan 2016")
        larger = line.size >= body.size * LARGER
        if not reads_like_title(
            text,
            question=line.ruled or larger,
            larger=larger,
            wraps=_wraps(lines, i),
            standout=larger or line.bold,  # `columnar` rules out its contents lines
        ):
            return False
        bolder = line.bold and not body.bold and line.size >= body.size * 0.95
        numbered = numbering(text) is not None
        letters = [ch for ch in text if ch.isalpha()]
        caps = (
            len(letters) >= 3
            and (all(ch.isupper() for ch in letters) or bool(_SMALL_CAPS.search(line.family)))
            and bool(_WORD.search(text))  # not initials only ("11 U.S.C. § 343")
        )
        marked = numbered and (caps or line.italic or bolder or larger)
        slightly = _style(line)[0] > body.size and not self._is_body(line, total)
        if line.family != body.family and (numbered or slightly) and not marked:
            # "2.1. Methods" or "References" a half-point larger in the sans of a serif
            # paper (not a second body's lines); not a running head "16 all.names"
            title = _NUMBER_PREFIX.sub("", text, count=1)
            marked = bool(_WORD.match(title)) and not title[0].islower() and _apart(lines, i)
        if line.ruled and not _CODE.search(text):
            marked = True  # a topic's name boxed by rules (`pdf_rules`)
        if (
            caps
            and len(text.split()) <= _CAPS_WORDS
            and _style(line) != _body_style(body)
            and (line.size >= body.size * _SMALLER or bool(_SMALL_CAPS.search(line.family)))
        ):
            marked = True  # "REFERENCES" in small capitals; not a form's "PAY TO THE" in 6 points
        if not marked and i > 0 and CHAPTER.fullmatch(lines[i - 1].text + " "):
            marked = True  # the title under a bare "Chapter 4"
        if not (larger or bolder or marked):
            return False
        opens = text[0].isupper() or (text[0].isdigit() and any(ch.isalpha() for ch in text))
        later = next((x for x in lines[i + 1 :] if x.text), None)
        code = (  # in another family than the text under it (a page of code samples is mono)
            text[0].islower()
            and len(text.split()) <= 3
            and later is not None
            and later.family != line.family
        )
        if not (larger or marked or opens) and not (
            (code or RELEASE.fullmatch(text)) and _apart(lines, i) and _spaced_above(lines, i)
        ):  # bold words inside a paragraph ("set dashtype (p. 142)"), a table's header row
            # ("content meaning"); a name in code type ("span_name", a column's) or a release's
            # "0.13.8", set apart by space above and below, is a heading
            return False
        if not (larger or marked) and _boxed_label(lines, i):
            return False  # a class's name in a diagram ("NetworkLinearFlow" under "«type»")
        if not marked and self._is_body(line, total):
            return False
        # A heading stands alone: the text after it does not carry on its sentence, or
        # stands apart below it. A heading wrapped over lines in its own style is skipped.
        style = _style(line)
        own = style != _body_style(body)
        following, above = None, line
        for later in lines[i + 1 :]:
            if not later.text:
                continue
            if own and _style(later) == style:
                above = later
                continue
            following = later
            break
        if following is None or larger or not following.text[0].islower():
            return True
        return following.styled and following.top < above.bottom - _APART * above.size

    def _is_body(self, line: PdfLine, total: int) -> bool:
        """Whether `line`'s style sets a body's share of the text so far."""
        return self.style_chars[_style(line)] > BODY_SHARE * total

    def _level(self, title: str, line: PdfLine) -> int:
        """The heading's level, one deeper than it would be once a "Part" was seen."""
        if (match := CHAPTER.match(title)) and match.group(1).casefold() == "part":
            self._part_seen = True
            return 1
        return min(self._rank(title, line) + self._part_seen, 6)

    def _rank(self, title: str, line: PdfLine) -> int:
        style = _style(line)
        depth = numbering(title)
        if depth is not None:
            if ROMAN.match(title):
                self._roman_seen = True
            elif depth == 1 and self._roman_seen and LETTERED.match(title):
                depth = 2  # "A. Method" under "III. APPROACH"
            self._numbered.setdefault(style, Counter())[depth] += 1
            self._numbered_tiers.add(_tier(style))
            return depth
        if style in self._numbered:
            return self._numbered[style].most_common(1)[0][0]
        if style not in self._levels:
            size, weight = _tier(style)
            above = {
                tier
                for tier in self._tiers | self._numbered_tiers
                if tier[0] > size + 0.5 or (abs(tier[0] - size) <= 0.5 and tier[1] > weight)
            }
            self._levels[style] = min(1 + len(above), 6)
        return self._levels[style]


def _continued(lines: list[PdfLine], start: int, span: int) -> bool:
    """Whether the heading, or the line just before it ("Exhibit 2-14 (Cont. 2)"), says
    it is continued."""
    before = next((line for line in reversed(lines[max(start - 2, 0) : start]) if line.text), None)
    texts = [line.text for line in lines[start : start + span]]
    return any(_CONTINUED.search(text) for text in [*texts, before.text if before else ""])


def _boxed_label(lines: list[PdfLine], i: int) -> bool:
    """Whether line `i` is centred under the line before it with no space between, in
    another style, not aligned on its left: text centred in a diagram's box."""
    before = next((line for line in reversed(lines[:i]) if line.text), None)
    line = lines[i]
    return (
        before is not None
        and _style(before) != _style(line)
        and line.top >= before.bottom - _APART * line.size
        and abs((line.left + line.right) - (before.left + before.right)) <= 2 * _CENTRED
        and abs(line.left - before.left) > 2 * _CENTRED
    )


def _body_style(body: BodyStyle) -> Style:
    return (round(body.size * 2) / 2, body.bold, False, False)


def _style(line: PdfLine) -> Style:
    return (round(line.size * 2) / 2, line.bold, line.italic, line.ruled)


def _tier(style: Style) -> tuple[float, int]:
    """Size and weight, for ranking heading styles: boxed by rules above bold above regular."""
    return (style[0], 2 if style[3] else int(style[1]))


def _apart(lines: list[PdfLine], i: int) -> bool:
    """Whether line `i` (with the lines it wraps onto) stands apart by space from the text
    after it (or a page's end); the space above a heading is often no more than a line's."""
    while i + 1 < len(lines) and lines[i + 1].text and _joined(lines[i], lines[i + 1]):
        i += 1
    line, later = lines[i], next((x for x in lines[i + 1 :] if x.text), None)
    return later is None or not later.styled or later.top < line.bottom - _APART * line.size


def _spaced_above(lines: list[PdfLine], i: int) -> bool:
    """Whether line `i` stands apart by space from the text above it (or opens the page)."""
    line, before = lines[i], next((x for x in reversed(lines[:i]) if x.text), None)
    return before is None or line.top < before.bottom - _APART * line.size


def _wrapped_end(lines: list[PdfLine], end: int) -> int:
    """Where a run of heading lines ending at `end` really ends: past the lines it wraps
    onto (the same style, no space between: "Program Management" / "and Review") while they
    read like a title; minus that place when one does not ("… of the" / "standing trustee
    must.": the first lines of a paragraph in heading type)."""
    while end < len(lines) and lines[end].text and _joined(lines[end - 1], lines[end]):
        if not reads_like_title(lines[end].text, wraps=_wraps(lines, end), standout=True):
            while end < len(lines) and lines[end].text and _joined(lines[end - 1], lines[end]):
                end += 1
            return -end
        end += 1
    return end


def _wraps(lines: list[PdfLine], i: int) -> bool:
    """Whether line `i` goes on in the next line: the same style, no space between."""
    line = lines[i]
    later = lines[i + 1] if i + 1 < len(lines) else None
    return later is not None and bool(later.text) and _joined(line, later)


def _joined(line: PdfLine, later: PdfLine) -> bool:
    """Whether `later` is the next line of the same block in `line`'s style (a title wrapped
    over lines), not one set apart by space."""
    return (
        _style(later) == _style(line)
        and later.family == line.family
        and later.top >= line.bottom - _APART * line.size
    )


def _split_run(lines: list[PdfLine], start: int, end: int) -> list[tuple[int, int]]:
    """Cut a run of heading lines into headings: a new one at a change of style, or at a
    number (a section's, a release's) unless the line wraps on from the one above (no space
    between); a bare "Chapter 4" keeps the title under it."""
    pieces: list[tuple[int, int]] = []
    first = start
    for position in range(start + 1, end):
        previous, line = lines[position - 1], lines[position]
        if not line.text:
            continue
        bare_chapter = bool(CHAPTER.fullmatch(previous.text.strip() + " "))
        if bare_chapter:
            continue
        numbered = numbering(line.text) is not None or RELEASE.fullmatch(line.text)
        if _style(line) != _style(previous) or (numbered and not _joined(previous, line)):
            pieces.append((first, position))
            first = position
    pieces.append((first, end))
    return pieces


def _stacked(lines: list[PdfLine], pieces: list[tuple[int, int]]) -> bool:
    """Whether a long run of heading lines is headings set one under the other (a title,
    its subtitle, then a heading: each piece short and set apart from the next by space,
    in the smaller type's measure, or by a change of size), not an emphasised paragraph."""
    if len(pieces) < 2:
        return False
    for (start, stop), (after, _) in zip(pieces, pieces[1:], strict=False):
        last, following = lines[stop - 1], lines[after]
        small, large = sorted((last.size, following.size))
        apart = following.top < last.bottom - _APART * small or large >= small * LARGER
        if stop - start > MAX_HEADING_LINES or not apart:
            return False
    return pieces[-1][1] - pieces[-1][0] <= MAX_HEADING_LINES
