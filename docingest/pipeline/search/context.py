"""A hit's context: its neighbouring chunks, or its heading section, merged into the exact
span of the document's extracted text they cover.

Chunks overlap (`chunk_overlap`) and are stripped, so consecutive chunks either overlap, touch,
or leave whitespace between them. Each stored chunk carries its offsets and that whitespace
(`gap`, from the chunker), so merging needs no search in the text: the next chunk adds its text
from where the merged text ends. Only chunks of the hit's own version are read, so a context is
never a mix of versions; a run stops at a chunk missing from the store (its version retired
meanwhile) or written before gaps were stored, so the context stays an exact slice, only
shorter.

A context is at most `CONTEXT_MAX_CHARS` long: the run grows one chunk at a time on each side
in turn, nearest first, while the merged span fits; a hit whose own chunk is longer than that
(a megabyte on one line) gets the `CONTEXT_MAX_CHARS` of its chunk around the excerpt, still an
exact slice, `chunk_indexes` naming that chunk alone.

All hits' chunks are read in one scroll (`docingest.pipeline.store.chunk_reads.read_ranges`).
"""

from __future__ import annotations

from collections.abc import Sequence

from docingest.pipeline.search.request import Context, Expand
from docingest.pipeline.store import ScoredChunk, SearchFilter, VectorStore
from docingest.pipeline.store.chunk_reads import ChunkRange, read_ranges
from docingest.pipeline.store.models import StoredChunk

Key = tuple[str, int]
"""A document and version."""
CONTEXT_MAX_CHARS = 40_000
"""Characters one result's context spans at most: a whole chunk of the largest size in
characters (32,768) and the 21 chunks of `expand.section` at the default size both fit."""


def contexts(
    store: VectorStore,
    index: str,
    hits: Sequence[ScoredChunk],
    expand: Expand,
    *,
    focus: Sequence[int] | None = None,
    within: SearchFilter | None = None,
) -> list[Context | None]:
    """Return the context of each hit (None for a hit without stored offsets); `focus` is
    where in each hit's text its context centres when the chunk alone is over the bound.
    `within` is the caller's visibility: a neighbour is of the hit's own version, so the
    hit's access holds for it, and the read keeps to it all the same."""
    radius = expand.radius
    ranges = [
        ChunkRange(hit.document_id, hit.version, max(hit.chunk_index - radius, 0),
                   hit.chunk_index + radius)
        for hit in hits
        if hit.start is not None
    ]  # fmt: skip
    by_version: dict[Key, dict[int, StoredChunk]] = {}
    for chunk in read_ranges(store, index, _merged(ranges), within=within):
        by_version.setdefault((chunk.document_id, chunk.version), {})[chunk.chunk_index] = chunk
    return [
        expand_hit(
            hit, by_version.get((hit.document_id, hit.version), {}), expand,
            focus=focus[number] if focus is not None else 0,
        )
        for number, hit in enumerate(hits)
    ]  # fmt: skip


def _merged(ranges: list[ChunkRange]) -> list[ChunkRange]:
    """Return `ranges` with those of one version that overlap merged (hits of one document)."""
    merged: list[ChunkRange] = []
    for part in sorted(ranges, key=lambda r: (r.document_id, r.version, r.first)):
        last = merged[-1] if merged else None
        if (
            last is not None
            and (last.document_id, last.version) == (part.document_id, part.version)
            and part.first <= last.last + 1
        ):
            merged[-1] = ChunkRange(
                last.document_id, last.version, last.first, max(last.last, part.last)
            )
        else:
            merged.append(part)
    return merged


def expand_hit(
    hit: ScoredChunk, chunks: dict[int, StoredChunk], expand: Expand, *, focus: int = 0
) -> Context | None:
    """Return the context of `hit` among `chunks` (its version's, by chunk index): the run of
    joinable chunks around it, `expand.radius` at most on each side, within its section for
    `expand.section`, `CONTEXT_MAX_CHARS` at most; None without offsets."""
    if hit.start is None or hit.end is None:
        return None
    if len(hit.text) > CONTEXT_MAX_CHARS:
        return _slice_of(hit, focus)
    center = chunks.get(hit.chunk_index) or StoredChunk(
        hit.document_id,
        hit.version,
        hit.chunk_index,
        hit.text,
        hit.start,
        hit.end,
        None,
        hit.page_start,
        hit.page_end,
        list(hit.headings),
    )  # fmt: skip; its own gap is read with its neighbours
    run = [center]
    start, end = hit.start, hit.end
    open_sides = {-1: True, 1: True}
    for distance in range(1, expand.radius + 1):
        for step in (-1, 1):
            if not open_sides[step]:
                continue
            chunk = chunks.get(hit.chunk_index + step * distance)
            if chunk is None or (expand.section and chunk.headings != hit.headings):
                open_sides[step] = False
                continue
            before, after = (chunk, run[0]) if step < 0 else (run[-1], chunk)
            grown = min(start, chunk.start or start), max(end, chunk.end or end)
            if _joint(before, after) is None or grown[1] - grown[0] > CONTEXT_MAX_CHARS:
                open_sides[step] = False
                continue
            start, end = grown
            if step < 0:
                run.insert(0, chunk)
            else:
                run.append(chunk)
    return merge(run)


def _slice_of(hit: ScoredChunk, focus: int) -> Context:
    """Return the `CONTEXT_MAX_CHARS` of the hit's own chunk centred on `focus` (an offset in
    its text): the exact slice of the extracted text they are."""
    assert hit.start is not None
    lo = max(0, min(focus - CONTEXT_MAX_CHARS // 2, len(hit.text) - CONTEXT_MAX_CHARS))
    hi = lo + CONTEXT_MAX_CHARS
    return Context(
        text=hit.text[lo:hi],
        start=hit.start + lo,
        end=hit.start + min(hi, len(hit.text)),
        chunk_indexes=[hit.chunk_index],
    )


def _joint(before: StoredChunk, after: StoredChunk) -> str | None:
    """Return the text `after` adds to a merge ending with `before`, or None where the two
    cannot be joined exactly (no offsets, or a gap not stored)."""
    if before.end is None or after.start is None or after.end is None:
        return None
    if after.start <= before.end:
        cut = before.end - after.start
        return after.text[cut:] if after.end >= before.end else ""
    if after.gap is None or len(after.gap) != after.start - before.end:
        return None
    return after.gap + after.text


def merge(run: Sequence[StoredChunk]) -> Context:
    """Merge consecutive chunks (offsets known, each joinable to the one before) exactly."""
    first = run[0]
    pieces, end = [first.text], first.end
    for before, after in zip(run, run[1:], strict=False):
        joint = _joint(before, after)
        if joint is None:
            raise ValueError(f"chunks {before.chunk_index} and {after.chunk_index} do not join")
        pieces.append(joint)
        end = max(end or 0, after.end or 0)
    assert first.start is not None
    return Context(
        text="".join(pieces),
        start=first.start,
        end=end or first.start,
        chunk_indexes=[chunk.chunk_index for chunk in run],
    )
