"""Cut a section too long for one chunk into pieces, and pack them into overlapping chunks.

A section is cut at the coarsest separator whose pieces fit, recursively: blank lines (block
boundaries among them), then sentence ends before line breaks for prose (hard-wrapped text
breaks lines every ~70 characters, mid-sentence) but line breaks first for lists, tables and
code, then whitespace, and as a last resort runs of characters (of tokens in token mode).
Pieces are packed greedily into chunks of at most `chunk_size`; each chunk after the first
opens with up to `chunk_overlap` of the previous one's end, starting at a piece, sentence
(line) or word start, never mid-word, possibly empty.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from operator import sub

from docingest.pipeline.chunking.sentences import first_sentence_start, sentence_cuts
from docingest.pipeline.chunking.tokens import LengthFunction, SpanLength, last_fitting
from docingest.pipeline.document import BlockKind

PARAGRAPH, SENTENCE, LINE, WORD, CHAR = range(5)
"""Separator levels, coarsest first; a piece's start boundary has one of these levels."""

_PROSE_ORDER = (SENTENCE, LINE, WORD)
_LINES_ORDER = (LINE, SENTENCE, WORD)
LINE_KINDS = frozenset({BlockKind.LIST, BlockKind.TABLE, BlockKind.CODE})
_LINE_ITEM = re.compile(r"\n[ \t]*(?:[-*+•|>]|\d{1,3}[.)])")  # list item, table row, quote

_SEPARATORS = {
    PARAGRAPH: re.compile(r"\n[^\S\n]*\n\s*"),
    LINE: re.compile(r"\n\s*"),
    WORD: re.compile(r"\s+"),
}


def _boundaries(text: str, lo: int, hi: int, level: int) -> tuple[list[int], list[int]]:
    """Return the piece ends and next piece starts of the cuts at `level` in a stripped span."""
    if level == SENTENCE:
        cuts = list(sentence_cuts(text, lo, hi))
        return [end for end, _ in cuts], [start for _, start in cuts]
    # Whitespace separators lie strictly inside a stripped span; those starting at a newline
    # leave any spaces before it (rare: extractors strip lines) to be trimmed off the piece.
    matches = list(_SEPARATORS[level].finditer(text, lo, hi))
    ends = [match.start() for match in matches]
    if level != WORD:
        ends = [_rstrip(text, lo, end) if text[end - 1].isspace() else end for end in ends]
    return ends, [match.end() for match in matches]


def _first_line_start(text: str, earliest: int, hi: int) -> int | None:
    """Return the first start of a line's text in `[earliest, hi)`, if any."""
    match = _SEPARATORS[LINE].search(text, earliest - 1, hi)
    return match.end() if match and match.end() < hi else None


def _rstrip(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


@dataclass
class Splitter:
    """Cuts sections into pieces and packs the pieces into overlapping chunks."""

    text: str
    size: int
    overlap: int
    length: LengthFunction
    measure: SpanLength
    offsets: list[int]  # where each block starts, and its kind
    kinds: list[BlockKind | None]  # None: not a list, table or code block
    linear: bool = False  # lengths are differences of offsets (characters)
    # Pieces of the section: start, end, level of the boundary at the start, uncut paragraph?
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    levels: list[int] = field(default_factory=list)
    whole: list[bool] = field(default_factory=list)

    def split_section(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """Return the chunk spans of one section."""
        self.starts, self.ends, self.levels, self.whole = [], [], [], []
        if self.measure(lo, hi) <= self.size and not self._overflows(lo, hi):
            return [(lo, hi)]
        self._cut(lo, hi, None, PARAGRAPH)
        return self._pack()

    def _in_lines(self, lo: int) -> bool:
        """Tell whether the block holding `lo` is a list, table or code (lines matter)."""
        return self.kinds[bisect_right(self.offsets, lo) - 1] is not None

    def _finer_order(self, lo: int, hi: int) -> tuple[int, ...]:
        """Return the separators to try within one paragraph: lines first if lines matter."""
        if self._in_lines(lo):
            return _LINES_ORDER
        newlines = self.text.count("\n", lo, hi)
        items = sum(1 for _ in _LINE_ITEM.finditer(self.text, lo, hi)) if newlines else 0
        return _LINES_ORDER if newlines and 2 * items >= newlines else _PROSE_ORDER

    def _overflows(
        self, start: int, end: int, *, counted: bool = False, budget: int | None = None
    ) -> bool:
        """Tell whether a span overflows `budget` (`size`) measured alone; where its span length
        is exact (always for characters), that is `counted`, what the span length said."""
        exact_at = self.measure.exact_at
        if self.linear or (exact_at(start) and exact_at(end)):
            return counted
        return self.length(self.text[start:end]) > (self.size if budget is None else budget)

    def _cut(self, lo: int, hi: int, order: tuple[int, ...] | None, start_level: int) -> None:
        """Append the pieces of `[lo, hi)`, cut at the first separator of `order` it holds."""
        level, candidates = CHAR, order
        rest: tuple[int, ...] = ()
        if candidates is None:
            ends, next_starts = _boundaries(self.text, lo, hi, PARAGRAPH)
            level = PARAGRAPH if ends else CHAR
            candidates = () if ends else self._finer_order(lo, hi)
        for index, candidate in enumerate(candidates):
            ends, next_starts = _boundaries(self.text, lo, hi, candidate)
            if ends:
                level, rest = candidate, candidates[index + 1 :]
                break
        if level == CHAR:  # a single unbreakable run: cut into pieces of `size`
            next_starts, position = [], lo
            while (
                position := max(self.measure.end_within(position, self.size), position + 1)
            ) < hi:
                next_starts.append(position)
            ends = next_starts
        piece_starts, piece_ends = [lo, *next_starts], [*ends, hi]
        count, size = len(piece_starts), self.size
        if self.linear:
            lengths = map(sub, piece_ends, piece_starts)
        else:
            lengths = map(self.measure, piece_starts, piece_ends)
        too_long = [] if level == CHAR else [i for i, n in enumerate(lengths) if n > size]
        if too_long and not self.linear:  # a count can overstate a piece whose ends cut a word
            pieces = list(zip(piece_starts, piece_ends, strict=True))
            too_long = [i for i in too_long if self._overflows(*pieces[i], counted=True)]
        piece_levels = [level] * count
        piece_levels[0] = start_level
        done = 0
        for i in [*too_long, count]:  # pieces that fit go in by runs; longer ones are cut finer
            if i > done:
                self.starts += piece_starts[done:i]
                self.ends += piece_ends[done:i]
                self.levels += piece_levels[done:i]
                self.whole += [level == PARAGRAPH] * (i - done)
            if i < count:
                start, end = piece_starts[i], piece_ends[i]
                finer = self._finer_order(start, end) if level == PARAGRAPH else rest
                self._cut(start, end, finer, piece_levels[i])
            done = i + 1

    def _pack(self) -> list[tuple[int, int]]:
        """Pack pieces greedily into spans; each span after the first opens with an overlap."""
        measure, size, starts, ends = self.measure, self.size, self.starts, self.ends
        spans: list[tuple[int, int]] = []
        first, start, count = 0, starts[0], len(starts)
        while first < count:
            limit = start + size if self.linear else measure.end_within(start, size)
            last = max(bisect_right(ends, limit, first) - 1, first)
            if self._overflows(start, ends[last]):
                if (last := self._shrink(start, first, last)) < first and start < starts[first]:
                    start = starts[first]  # give up the overlap
                    last = self._shrink(start, first, first)
                if last < first:  # the piece alone overflows: cut it by characters
                    spans += self._split_characters(start, ends[first])
                    first += 1
                    start = starts[first] if first < count else start
                    continue
            spans.append((start, ends[last]))
            first = last + 1
            if first < count:
                start = self._overlap_start(start, ends[last], first)
        return spans

    def _shrink(self, start: int, first: int, last: int) -> int:
        """Return the last piece up to which `start` fits, measured alone (`first - 1`: none)."""
        return first + last_fitting(
            self.length, self.text, start, self.ends[first : last + 1], self.size
        )

    def _overlap_start(self, previous_start: int, previous_end: int, first: int) -> int:
        """Return where the chunk whose first new piece is `first` starts: the earliest piece,
        sentence or word start in the previous chunk within `overlap` of its end that fits."""
        starts, levels = self.starts, self.levels
        next_start = starts[first]
        if not self.overlap or levels[first] == CHAR:  # no overlap into a cut word
            return next_start
        if self.linear:
            earliest = max(previous_end - self.overlap, self.ends[first] - self.size)
        else:
            within = self.measure.start_within
            earliest = max(within(previous_end, self.overlap), within(self.ends[first], self.size))
        earliest = max(earliest, previous_start + 1)
        k = bisect_left(starts, earliest, 0, first)
        straddler, cut = k - 1, None  # in a whole paragraph, start at a sentence (line)
        if straddler >= 0 and self.whole[straddler] and self.ends[straddler] > earliest:
            lo, end = max(starts[straddler], previous_start), self.ends[straddler]
            if self._in_lines(lo):
                cut = _first_line_start(self.text, earliest, end)
            else:
                cut = first_sentence_start(self.text, lo, end, earliest)
        if cut is None:
            cut = next((starts[i] for i in range(k, first) if levels[i] <= WORD), next_start)
        if cut < next_start and self._overflows(cut, previous_end, budget=self.overlap):
            return next_start  # the overlap, counted on its own, is longer than it seemed
        return cut

    def _split_characters(self, start: int, end: int) -> list[tuple[int, int]]:
        """Cut at the longest prefixes that fit, re-measured (a character that alone overflows
        is kept whole)."""
        spans = []
        while start < end:
            prefixes = range(start + 1, end + 1)
            cut = prefixes[max(last_fitting(self.length, self.text, start, prefixes, self.size), 0)]
            if (piece_end := _rstrip(self.text, start, cut)) > start:
                spans.append((start, piece_end))
            start = cut
            while start < end and self.text[start].isspace():
                start += 1
        return spans
