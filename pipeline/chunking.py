"""Split a document's blocks into overlapping chunks with exact offsets into its full text.

The full text is `join_blocks(blocks)[0]`; every chunk is a stripped span of it, its offsets
carried along while splitting (never recovered with `str.find`).

Sections: a heading opens a section that runs to the next heading; headings directly followed
by another heading have no body and open the next section with it (their text stays in its
span). Headings with no body at all (a headings-only document, trailing headings) yield no
chunk: nothing to retrieve under them. Sections are never merged, however small: a chunk
carries one heading path, and merging e.g. a changelog's entries would label text with the
wrong heading and blur the strongest topic boundary the document has.

A section that is too long is cut at the coarsest separator whose pieces fit, recursively:
blank lines (block boundaries among them), then sentence ends before line breaks for prose
(hard-wrapped text breaks lines every ~70 characters, mid-sentence) but line breaks first for
lists, tables and code, then whitespace, and as a last resort runs of characters (of tokens
in token mode). Pieces are packed greedily into chunks of at most `chunk_size`; each chunk
after the first opens with up to `chunk_overlap` of the previous one's end, starting at a
piece, sentence (line) or word start, never mid-word, possibly empty.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import sub

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipeline.document import BLOCK_SEPARATOR, Block, BlockKind
from pipeline.sentences import first_sentence_start, sentence_cuts
from pipeline.settings import ChunkUnit, Settings
from pipeline.tokens import CharLength, LengthFunction, SpanLength, char_length, last_fitting


class ChunkingSpec(BaseModel):
    """How an index's documents are split; `chunk_overlap` is in `unit`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chunk_size: int = Field(default=1000, gt=0)
    chunk_overlap: int = Field(default=150, ge=0)
    unit: ChunkUnit = ChunkUnit.CHARS

    @model_validator(mode="after")
    def _check_overlap(self) -> ChunkingSpec:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("chunk_overlap must be smaller than chunk_size")
        return self

    @classmethod
    def from_settings(cls, settings: Settings) -> ChunkingSpec:
        return cls(
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
            unit=settings.chunk_unit,
        )


PARAGRAPH, SENTENCE, LINE, WORD, CHAR = range(5)
"""Separator levels, coarsest first; a piece's start boundary has one of these levels."""

_PROSE_ORDER = (SENTENCE, LINE, WORD)
_LINES_ORDER = (LINE, SENTENCE, WORD)
_LINE_KINDS = frozenset({BlockKind.LIST, BlockKind.TABLE, BlockKind.CODE})
_LINE_ITEM = re.compile(r"\n[ \t]*(?:[-*+•|>]|\d{1,3}[.)])")  # list item, table row, quote

_SEPARATORS = {
    PARAGRAPH: re.compile(r"\n[^\S\n]*\n\s*"),
    LINE: re.compile(r"\n\s*"),
    WORD: re.compile(r"\s+"),
}


@dataclass(frozen=True, slots=True)
class Chunk:
    """The span `[start, end)` of the full text (`text == full_text[start:end]`): pages are
    the first and last of the blocks it overlaps (None without pages), `headings` the section's
    heading path, outermost first."""

    index: int
    text: str
    start: int
    end: int
    page_start: int | None
    page_end: int | None
    headings: tuple[str, ...]


def chunk_text(
    text: str, *, chunk_size: int, chunk_overlap: int, length: LengthFunction = char_length
) -> list[Chunk]:
    """Chunk a plain string (one block without structure); offsets are into `text`."""
    return chunk_document(
        [Block(text)], chunk_size=chunk_size, chunk_overlap=chunk_overlap, length=length
    )


def chunk_document(
    blocks: Iterable[Block],
    *,
    chunk_size: int,
    chunk_overlap: int,
    length: LengthFunction = char_length,
) -> list[Chunk]:
    """Split `blocks` into chunks of at most `chunk_size` (in the unit `length` measures).

    The only chunk that can exceed `chunk_size` is a single character whose own length does
    (a character that is several tokens, with a tiny token budget).
    """
    return list(
        iter_chunks(blocks, chunk_size=chunk_size, chunk_overlap=chunk_overlap, length=length)
    )


def iter_chunks(
    blocks: Iterable[Block],
    *,
    chunk_size: int,
    chunk_overlap: int,
    length: LengthFunction = char_length,
) -> Iterator[Chunk]:
    """`chunk_document`, yielding each section's chunks as soon as the section is closed
    (by the next section's heading, or the end of `blocks`), so chunks can be embedded while
    later blocks are still being extracted. Only the open section's blocks are held.

    Each section is split on its own text alone (the joined text of its blocks, offsets
    shifted back to the document's): a section's cuts never look outside it, and token
    counts are made block by block, so the chunks are those of the whole document's text.
    """
    if not 0 <= chunk_overlap < chunk_size:
        raise ValueError(
            "chunk_size must be positive and chunk_overlap at least 0 and below it, "
            f"not {chunk_size} and {chunk_overlap}."
        )
    tracker, held = _SectionTracker(), _HeldBlocks()
    count, position = 0, 0
    for block in blocks:
        section = tracker.feed(block, position)
        if section is not None:
            for chunk in held.split(section, chunk_size, chunk_overlap, length, first=count):
                yield chunk
                count += 1
        held.add(block, position)
        position += len(block.text) + len(BLOCK_SEPARATOR)
    section = tracker.close()
    if section is not None:
        yield from held.split(section, chunk_size, chunk_overlap, length, first=count)


Section = tuple[int, int, tuple[str, ...]]
"""A section's stripped span `[lo, hi)` in the document's text and its heading path."""


@dataclass(slots=True)
class _SectionTracker:
    """Finds sections block by block: a heading opens a section that runs to the next
    heading; body-less headings join the next section."""

    path: list[tuple[int, str]] = field(default_factory=list)
    run_start: int = -1  # start of the headings waiting for a body, if any
    section_start: int = -1  # start of the open section, if any
    headings: tuple[str, ...] = ()
    last_start: int = 0  # the open section's last body block
    last_text: str = ""

    def feed(self, block: Block, start: int) -> Section | None:
        """Take the block starting at `start`; return the section it closes, if any."""
        text = block.text
        if not text or text.isspace():
            return None
        closed = None
        if block.kind is BlockKind.HEADING:
            level, path = max(block.level, 1), self.path
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, text.strip()))
            if self.run_start < 0:
                self.run_start = start + len(text) - len(text.lstrip())
            closed = self.close()
        elif self.section_start < 0:
            self.section_start = (
                self.run_start if self.run_start >= 0 else start + len(text) - len(text.lstrip())
            )
            self.headings = tuple(heading for _, heading in self.path)
            self.run_start = -1
            self.last_start, self.last_text = start, text
        else:
            self.last_start, self.last_text = start, text
        return closed

    def close(self) -> Section | None:
        """Close the open section, if any, and return it."""
        if self.section_start < 0:
            return None
        section = (
            self.section_start,
            self.last_start + len(self.last_text.rstrip()),
            self.headings,
        )
        self.section_start = -1
        return section


@dataclass(slots=True)
class _HeldBlocks:
    """The blocks from the open section's first one on, with their document offsets."""

    blocks: list[Block] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)

    def add(self, block: Block, start: int) -> None:
        self.blocks.append(block)
        self.offsets.append(start)

    def split(
        self,
        section: Section,
        size: int,
        overlap: int,
        length: LengthFunction,
        *,
        first: int,
    ) -> list[Chunk]:
        """Chunk `section` (numbered from `first`) and forget the blocks up to its end."""
        lo, hi, headings = section
        end = bisect_left(self.offsets, hi)  # the blocks starting before the section's end
        begin = max(bisect_right(self.offsets, lo) - 1, 0)
        blocks, base = self.blocks[begin:end], self.offsets[begin]
        offsets = [offset - base for offset in self.offsets[begin:end]]
        del self.blocks[:end], self.offsets[:end]
        text = BLOCK_SEPARATOR.join(block.text for block in blocks)
        linear = isinstance(length, CharLength)  # characters need no reading ahead
        regions = (
            [] if linear else [(s, s + len(b.text)) for b, s in zip(blocks, offsets, strict=True)]
        )
        measure = length.measure_spans(text, regions)
        kinds = [block.kind if block.kind in _LINE_KINDS else None for block in blocks]
        splitter = _Splitter(text, size, overlap, length, measure, offsets, kinds)
        splitter.linear = linear
        pages = [block.page for block in blocks]
        has_pages = any(page is not None for page in pages)
        chunks: list[Chunk] = []
        for start, stop in splitter.split_section(lo - base, hi - base):
            known = []
            if has_pages:  # the pages of the blocks the chunk overlaps
                low, high = bisect_right(offsets, start) - 1, bisect_right(offsets, stop - 1)
                known = [page for page in pages[low:high] if page is not None]
            page_start, page_end = (min(known), max(known)) if known else (None, None)
            chunks.append(
                Chunk(
                    first + len(chunks),
                    text[start:stop],
                    start + base,
                    stop + base,
                    page_start,
                    page_end,
                    headings,
                )
            )
        return chunks


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
class _Splitter:
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
