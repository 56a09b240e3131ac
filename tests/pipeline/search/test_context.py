"""Context: chunks merged by their offsets and gaps are the exact slice of the extracted text,
on every text file of the shared corpus (prepared in this process: the merge needs no store to
be shown exact; tests/pipeline/search/test_answers.py reads it back from both engines)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from docingest.pipeline.chunking import Chunk, ChunkingSpec
from docingest.pipeline.errors import EmptyDocument, NoTextFound
from docingest.pipeline.prepare import prepare_document
from docingest.pipeline.search.context import expand_hit, merge
from docingest.pipeline.search.request import Expand
from docingest.pipeline.settings import Settings
from docingest.pipeline.store import ScoredChunk
from docingest.pipeline.store.models import StoredChunk
from tests.support.paths import CORPUS_DIR

TEXT_FILES = sorted((CORPUS_DIR / "txt").iterdir())
SPECS = [ChunkingSpec(), ChunkingSpec(chunk_size=300, chunk_overlap=0)]


def stored(chunk: Chunk, version: int = 1) -> StoredChunk:
    return StoredChunk(
        "doc", version, chunk.index, chunk.text, chunk.start, chunk.end, chunk.gap,
        chunk.page_start, chunk.page_end, list(chunk.headings),
    )  # fmt: skip


def hit(chunk: Chunk) -> ScoredChunk:
    return ScoredChunk(
        id=str(chunk.index), score=1.0, document_id="doc", version=1,
        chunk_index=chunk.index, text=chunk.text, filename=None, format=None,
        page_start=chunk.page_start, page_end=chunk.page_end,
        headings=list(chunk.headings), metadata={}, start=chunk.start, end=chunk.end,
    )  # fmt: skip


@pytest.mark.parametrize("spec", SPECS, ids=["default", "300-no-overlap"])
@pytest.mark.parametrize("path", TEXT_FILES, ids=[path.name for path in TEXT_FILES])
def test_context_is_the_exact_slice_of_the_extracted_text(path: Path, spec: ChunkingSpec) -> None:
    try:
        prepared = prepare_document(
            path.read_bytes(), filename=path.name, settings=Settings(), chunking=spec
        )
    except (EmptyDocument, NoTextFound):
        assert path.stat().st_size == 0 or not path.read_bytes().strip()
        return
    text, chunks = prepared.text, prepared.chunks
    by_index = {chunk.index: stored(chunk) for chunk in chunks}
    # The whole document merged at once, then every chunk's neighbours and section.
    whole = merge(list(by_index.values()))
    assert whole.text == text[whole.start : whole.end]
    assert (whole.start, whole.end) == (chunks[0].start, chunks[-1].end)
    for expand in (Expand(neighbors=2), Expand(section=True)):
        for chunk in chunks[:: max(len(chunks) // 200, 1)]:
            context = expand_hit(hit(chunk), by_index, expand)
            assert context is not None
            assert context.text == text[context.start : context.end]
            assert chunk.index in context.chunk_indexes
            assert context.start <= chunk.start and chunk.end <= context.end
            indexes = context.chunk_indexes
            assert indexes == list(range(indexes[0], indexes[-1] + 1))
            if expand.section:
                assert all(by_index[i].headings == list(chunk.headings) for i in indexes)
                assert len(indexes) <= 21
            else:
                lo, hi = max(chunk.index - 2, 0), min(chunk.index + 2, len(chunks) - 1)
                assert indexes == list(range(lo, hi + 1))


def test_a_run_stops_where_a_chunk_is_missing_or_its_gap_unknown() -> None:
    text = "One sentence here. " * 60
    prepared = prepare_document(
        text.encode(), filename="a.txt", settings=Settings(),
        chunking=ChunkingSpec(chunk_size=120, chunk_overlap=0),
    )  # fmt: skip
    chunks = prepared.chunks
    assert len(chunks) > 6 and all(chunk.gap == " " for chunk in chunks[1:])
    by_index = {chunk.index: stored(chunk) for chunk in chunks}
    del by_index[5]  # retired meanwhile
    by_index[2] = dataclasses.replace(stored(chunks[2]), gap=None)  # written before gaps
    context = expand_hit(hit(chunks[3]), by_index, Expand(neighbors=3))
    assert context is not None and context.chunk_indexes == [2, 3, 4]
    assert context.text == prepared.text[context.start : context.end]
