"""Split a document's blocks into sections, and the sections into chunks with exact offsets
into its full text.

The full text is `join_blocks(blocks)[0]`; every chunk is a stripped span of it, its offsets
carried along while splitting (never recovered with `str.find`).

Sections: a heading opens a section that runs to the next heading; headings directly followed
by another heading have no body and open the next section with it (their text stays in its
span). Headings with no body at all (a headings-only document, trailing headings) yield no
chunk: nothing to retrieve under them. Sections are never merged, however small: a chunk
carries one heading path, and merging e.g. a changelog's entries would label text with the
wrong heading and blur the strongest topic boundary the document has. A section too long for
one chunk is cut by `docingest.pipeline.chunking.splitter`: a table's rows are its lines, so a
row is split only when it alone is longer than a chunk.

A chunk that starts inside a table after its first row carries that header row in
`Chunk.table_header`, not in its text: the text stays an exact slice of the document (offsets,
gaps, highlights and `expand` rebuild text from slices), and the vectors are made from the
header and the text together (docs/design/decisions, "Table header rows beside the chunk").
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from docingest.pipeline.chunking.splitter import LINE_KINDS, Splitter
from docingest.pipeline.chunking.tokens import CharLength, LengthFunction, char_length
from docingest.pipeline.document import BLOCK_SEPARATOR, Block, BlockKind


@dataclass(frozen=True, slots=True)
class Chunk:
    """The span `[start, end)` of the full text (`text == full_text[start:end]`): pages are
    the first and last of the blocks it overlaps (None without pages), `headings` the section's
    heading path, outermost first. `gap` is the text between the previous chunk's end and this
    one's start (whitespace; empty where they overlap or touch, and for the first chunk): with
    it, consecutive chunks rebuild the text they span exactly
    (`docingest.pipeline.search.context`)."""

    index: int
    text: str
    start: int
    end: int
    page_start: int | None
    page_end: int | None
    headings: tuple[str, ...]
    gap: str = ""
    table_header: str = ""
    """The header row (first line) of the table block this chunk starts inside of, when the
    chunk does not hold it: kept beside `text`, never in it, so offsets stay exact slices;
    the vectors are made from it and the text together (`indexing.chunk_vectors`)."""


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
    tail: tuple[int, str] | None = None
    """Where the last chunk so far ends, and the rest of its block's text from there."""

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
        lead = self._lead(begin)
        del self.blocks[:end], self.offsets[:end]
        text = BLOCK_SEPARATOR.join(block.text for block in blocks)
        linear = isinstance(length, CharLength)  # characters need no reading ahead
        regions = (
            [] if linear else [(s, s + len(b.text)) for b, s in zip(blocks, offsets, strict=True)]
        )
        measure = length.measure_spans(text, regions)
        kinds = [block.kind if block.kind in LINE_KINDS else None for block in blocks]
        splitter = Splitter(text, size, overlap, length, measure, offsets, kinds)
        splitter.linear = linear
        pages = [block.page for block in blocks]
        has_pages = any(page is not None for page in pages)
        chunks: list[Chunk] = []
        previous = None  # the previous chunk's end in `text`; before it, `lead` leads here
        for start, stop in splitter.split_section(lo - base, hi - base):
            if previous is None:
                gap = "" if lead is None else lead + text[:start]
            else:
                gap = text[previous:start] if start > previous else ""
            previous = stop
            known = []
            if has_pages:  # the pages of the blocks the chunk overlaps
                low, high = bisect_right(offsets, start) - 1, bisect_right(offsets, stop - 1)
                known = [page for page in pages[low:high] if page is not None]
            page_start, page_end = (min(known), max(known)) if known else (None, None)
            block = bisect_right(offsets, start) - 1
            table_header = ""
            if blocks[block].kind is BlockKind.TABLE and start > offsets[block]:
                table_header = blocks[block].text.split("\n", 1)[0]
                if len(table_header) > size:  # a header longer than a chunk: not repeated
                    table_header = ""
            chunks.append(
                Chunk(
                    first + len(chunks),
                    text[start:stop],
                    start + base,
                    stop + base,
                    page_start,
                    page_end,
                    headings,
                    gap,
                    table_header,
                )
            )
        if previous is not None:  # the text after the last chunk, for the next one's gap
            last = bisect_right(offsets, previous - 1) - 1
            self.tail = (previous + base, blocks[last].text[previous - offsets[last] :])
        return chunks

    def _lead(self, begin: int) -> str | None:
        """Return the text from the last chunk's end to the start of the held block `begin`
        (None before the first chunk)."""
        if self.tail is None:
            return None
        pieces = [self.tail[1]]
        for block in self.blocks[:begin]:
            pieces += (BLOCK_SEPARATOR, block.text)
        pieces.append(BLOCK_SEPARATOR)
        return "".join(pieces)
