"""Offsets, excerpts and context read back from the store, on both engines alike, and a
document's chunks page by page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.embedders.base import EmbeddingConfig
from docingest.pipeline.embedders.local import LocalEmbedder
from docingest.pipeline.errors import CursorExpired, DocumentNotFound, InvalidCursor
from docingest.pipeline.indexing.chunk_vectors import chunk_records, text_hash
from docingest.pipeline.prepare import PreparedDocument, prepare_document
from docingest.pipeline.search import SearchRequest, SearchTarget, search
from docingest.pipeline.search.request import Result
from docingest.pipeline.settings import Settings
from docingest.pipeline.sparse import encode_document
from docingest.pipeline.store import DocumentFields, IndexConfig, VectorStore
from docingest.pipeline.store.chunk_pages import document_chunks, encode_cursor
from tests.support.engines import ENGINES, engine_fields
from tests.support.paths import CORPUS_DIR

INDEX = "answers"
CONFIG = IndexConfig(
    embedding=EmbeddingConfig(provider="local", model="all-MiniLM-L6-v2", dimensions=384)
)
SPEC = ChunkingSpec(chunk_size=400, chunk_overlap=60)
SOURCE = CORPUS_DIR / "txt" / "wikipedia-iwan-roberts-norwich.txt"
QUERIES = ["Norwich City goals", "Wales international striker", "Leicester transfer fee"]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder.load()


@pytest.fixture(scope="module")
def prepared() -> PreparedDocument:
    return prepare_document(
        SOURCE.read_bytes(), filename=SOURCE.name, settings=Settings(), chunking=SPEC
    )


_VECTORS: dict[str, np.ndarray] = {}
"""Chunk text → vector, embedded once for the module (each test writes its own store)."""


def write_version(
    store: VectorStore, embedder: LocalEmbedder, prepared: PreparedDocument, version: int
) -> None:
    chunks = prepared.chunks
    hashes = [text_hash(chunk.text) for chunk in chunks]
    missing = [chunk.text for chunk in chunks if chunk.text not in _VECTORS]
    if missing:
        _VECTORS.update(zip(missing, embedder.embed_documents(missing), strict=True))
    vectors = {digest: _VECTORS[c.text] for digest, c in zip(hashes, chunks, strict=True)}
    fields = DocumentFields(
        filename=SOURCE.name, format="txt", content_sha256=None, pages=None, words=None,
        chunk_count=len(chunks),
    )  # fmt: skip
    records = chunk_records(
        chunks, hashes=hashes, vectors=vectors,
        sparse=[encode_document(chunk.text) for chunk in chunks],
        document_id="roberts", version=version, fields=fields, ocr=None,
    )  # fmt: skip
    store.write_chunks(INDEX, records)
    store.publish(INDEX, "roberts", version)


def open_store(engine: str, data_dir: Path) -> VectorStore:
    settings = Settings(**engine_fields(engine, data_dir), data_dir=data_dir)
    return VectorStore.open(settings)


@pytest.fixture(params=ENGINES)
def store(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    embedder: LocalEmbedder,
    prepared: PreparedDocument,
) -> Iterator[VectorStore]:
    with open_store(request.param, tmp_path) as vector_store:
        vector_store.create_index(INDEX, CONFIG)
        write_version(vector_store, embedder, prepared, 1)
        yield vector_store


def run(store: VectorStore, embedder: LocalEmbedder, query: str, **fields: object) -> list[Result]:
    request = SearchRequest.model_validate({"query": query, "top_k": 8, **fields})
    return search(store, SearchTarget(INDEX, embedder), request).results


def check_result(result: Result, text: str) -> None:
    assert result.start is not None and result.end is not None
    assert result.text == text[result.start : result.end]
    assert result.excerpt is not None
    assert result.excerpt.text == result.text[result.excerpt.start : result.excerpt.end]
    for start, end in result.highlights:
        assert 0 <= start < end <= len(result.text)


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
def test_results_carry_offsets_excerpts_and_neighbours(
    store: VectorStore, embedder: LocalEmbedder, prepared: PreparedDocument, mode: str
) -> None:
    text = prepared.text
    for query in QUERIES:
        results = run(store, embedder, query, mode=mode, expand={"neighbors": 2})
        assert results
        for result in results:
            check_result(result, text)
            context = result.context
            assert context is not None
            assert context.text == text[context.start : context.end]
            last = len(prepared.chunks) - 1
            low, high = max(result.chunk_index - 2, 0), min(result.chunk_index + 2, last)
            assert context.chunk_indexes == list(range(low, high + 1))
        assert any(result.highlights for result in results)


def test_a_section_context_stays_in_the_hits_section(
    store: VectorStore, embedder: LocalEmbedder, prepared: PreparedDocument
) -> None:
    headings = {chunk.index: list(chunk.headings) for chunk in prepared.chunks}
    for result in run(store, embedder, "Norwich", expand={"section": True}):
        context = result.context
        assert context is not None and context.text == prepared.text[context.start : context.end]
        assert all(headings[i] == result.headings for i in context.chunk_indexes)
        assert len(context.chunk_indexes) <= 21


def test_without_excerpt_or_expand_the_fields_stay_empty(
    store: VectorStore, embedder: LocalEmbedder
) -> None:
    for result in run(store, embedder, "Norwich", excerpt=False):
        assert result.excerpt is None and result.highlights == [] and result.context is None


def test_a_context_never_mixes_versions(
    store: VectorStore, embedder: LocalEmbedder, prepared: PreparedDocument
) -> None:
    """Version 2 (the text in capitals) is live beside version 1 for a moment: each hit's
    context is read from its own version, and the search keeps the newest."""
    upper = prepare_document(
        prepared.text.upper().encode(), filename=SOURCE.name, settings=Settings(), chunking=SPEC
    )
    write_version(store, embedder, upper, 2)
    for result in run(store, embedder, "NORWICH CITY", expand={"neighbors": 3}):
        context = result.context
        assert context is not None and context.text == upper.text[context.start : context.end]
        assert context.text == context.text.upper()


def test_both_engines_answer_alike(
    tmp_path: Path, embedder: LocalEmbedder, prepared: PreparedDocument
) -> None:
    answers: list[tuple[object, object]] = []
    for engine in ("qdrant-client", "edge"):
        with open_store(engine, tmp_path / engine) as vector_store:
            vector_store.create_index(INDEX, CONFIG)
            write_version(vector_store, embedder, prepared, 1)
            results = run(vector_store, embedder, QUERIES[0], mode="keyword",
                          expand={"neighbors": 1})  # fmt: skip
            pages = document_chunks(vector_store, INDEX, "roberts", limit=7)
            found = [r.model_dump(exclude={"score", "scores"}) for r in results]
            answers.append((found, pages.model_dump()))
    assert answers[0] == answers[1]


def test_a_documents_chunks_come_in_order_page_by_page(
    store: VectorStore, embedder: LocalEmbedder, prepared: PreparedDocument
) -> None:
    seen, cursor = [], None
    while True:
        page = document_chunks(store, INDEX, "roberts", limit=7, cursor=cursor)
        assert page.version == 1 and len(page.chunks) <= 7
        seen += page.chunks
        if (cursor := page.next_cursor) is None:
            break
    assert [chunk.chunk_index for chunk in seen] == list(range(len(prepared.chunks)))
    for chunk, original in zip(seen, prepared.chunks, strict=True):
        assert (chunk.text, chunk.start, chunk.end) == (original.text, original.start, original.end)
        assert chunk.headings == list(original.headings)
    with pytest.raises(DocumentNotFound):
        document_chunks(store, INDEX, "nobody")
    real = encode_cursor(INDEX, "roberts", 1, 3)
    other_document = encode_cursor(INDEX, "someone", 1, 3)
    for bad in ["", "garbage", "v1", real + "x", real[:-2], "dj8uMg", "==", other_document]:
        with pytest.raises(InvalidCursor):
            document_chunks(store, INDEX, "roberts", cursor=bad)
    old_cursor = encode_cursor(INDEX, "roberts", 1, 7)
    write_version(store, embedder, prepared, 2)
    store.retire(INDEX, "roberts", keep_version=2)
    with pytest.raises(CursorExpired):
        document_chunks(store, INDEX, "roberts", cursor=old_cursor)
    assert document_chunks(store, INDEX, "roberts", limit=500).version == 2
