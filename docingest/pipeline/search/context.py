"""A hit's context: its neighbouring chunks, or its heading section, merged into the exact
span of the document's extracted text they cover.

Chunks overlap (`chunk_overlap`) and are stripped, so consecutive chunks either overlap, touch,
or leave whitespace between them. Each stored chunk carries its offsets and that whitespace
(`gap`, from the chunker), so merging needs no search in the text: the next chunk adds its text
from where the merged text ends. Only chunks of the hit's own version are read, so a context is
never a mix of versions; a run stops at a chunk missing from the store (its version retired
meanwhile) or written before gaps were stored, so the context stays an exact slice, only
shorter.

All hits' chunks are read in one scroll (`docingest.pipeline.store.chunk_reads.read_ranges`).
"""

from __future__ import annotations

from collections.abc import Sequence

from docingest.pipeline.search.request import Context, Expand
from docingest.pipeline.store import ScoredChunk, VectorStore
from docingest.pipeline.store.chunk_reads import ChunkRange, read_ranges
from docingest.pipeline.store.models import StoredChunk

Key = tuple[str, int]
"""A document and version."""


def contexts(
    store: VectorStore, index: str, hits: Sequence[ScoredChunk], expand: Expand
) -> list[Context | None]:
    """Return the context of each hit (None for a hit without stored offsets)."""
    radius = expand.radius
    ranges = [
        ChunkRange(hit.document_id, hit.version, max(hit.chunk_index - radius, 0),
                   hit.chunk_index + radius)
        for hit in hits
        if hit.start is not None
    ]  # fmt: skip
    by_version: dict[Key, dict[int, StoredChunk]] = {}
    for chunk in read_ranges(store, index, _merged(ranges)):
        by_version.setdefault((chunk.document_id, chunk.version), {})[chunk.chunk_index] = chunk
    return [
        expand_hit(hit, by_version.get((hit.document_id, hit.version), {}), expand) for hit in hits
    ]


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


def expand_hit(hit: ScoredChunk, chunks: dict[int, StoredChunk], expand: Expand) -> Context | None:
    """Return the context of `hit` among `chunks` (its version's, by chunk index): the run of
    joinable chunks around it, `expand.radius` at most on each side, within its section for
    `expand.section`; None without offsets."""
    radius = expand.radius
    if hit.start is None or hit.end is None:
        return None
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
    for step in (-1, 1):
        for distance in range(1, radius + 1):
            chunk = chunks.get(hit.chunk_index + step * distance)
            if chunk is None or (expand.section and chunk.headings != hit.headings):
                break
            before, after = (chunk, run[0]) if step < 0 else (run[-1], chunk)
            if _joint(before, after) is None:
                break
            if step < 0:
                run.insert(0, chunk)
            else:
                run.append(chunk)
    return merge(run)


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
