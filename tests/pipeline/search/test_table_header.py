"""A continued table's header row goes through the store into search results and the chunk
listing, on both engines: stored where a chunk continues a table, absent elsewhere (ADR 0019)."""

from __future__ import annotations

from pathlib import Path

import pytest

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.embedders.base import EmbeddingConfig
from docingest.pipeline.embedders.local import LocalEmbedder
from docingest.pipeline.indexing.chunk_vectors import chunk_records, text_hash
from docingest.pipeline.prepare import prepare_document
from docingest.pipeline.search import SearchRequest, SearchTarget, search
from docingest.pipeline.settings import Settings
from docingest.pipeline.sparse import encode_document
from docingest.pipeline.store import DocumentFields, IndexConfig, VectorStore
from docingest.pipeline.store.chunk_pages import document_chunks
from tests.support.engines import ENGINES, engine_fields

INDEX = "tables"
CONFIG = IndexConfig(
    embedding=EmbeddingConfig(provider="local", model="all-MiniLM-L6-v2", dimensions=384)
)
ROWS = "".join(
    f"<tr><td>package{n}</td><td>{n * 7} KiB</td><td>tool number {n} of the set</td></tr>"
    for n in range(60)
)
HTML = (
    "<html><body><p>The packages below.</p><table><tr><th>Package</th><th>Size</th>"
    f"<th>Description</th></tr>{ROWS}</table><p>After the table.</p></body></html>"
).encode()


@pytest.mark.parametrize("engine", ENGINES)
def test_search_results_carry_the_header_of_a_continued_table(engine: str, tmp_path: Path) -> None:
    prepared = prepare_document(
        HTML, filename="packages.html", settings=Settings(),
        chunking=ChunkingSpec(chunk_size=400, chunk_overlap=0),
    )  # fmt: skip
    continued = [chunk for chunk in prepared.chunks if chunk.table_header]
    assert continued and all(c.table_header == "Package | Size | Description" for c in continued)
    embedder = LocalEmbedder.load()
    texts = [chunk.text for chunk in prepared.chunks]
    hashes = [text_hash(text) for text in texts]
    vectors = dict(zip(hashes, embedder.embed_documents(texts), strict=True))
    fields = DocumentFields(
        filename="packages.html", format="html", content_sha256=None, pages=None, words=None,
        chunk_count=len(texts),
    )  # fmt: skip
    records = chunk_records(
        prepared.chunks, hashes=hashes, vectors=vectors,
        sparse=[encode_document(text) for text in texts], document_id="packages", version=1,
        fields=fields, ocr=None,
    )  # fmt: skip
    settings = Settings(**engine_fields(engine, tmp_path), data_dir=tmp_path)
    with VectorStore.open(settings) as store:
        store.create_index(INDEX, CONFIG)
        store.write_chunks(INDEX, records)
        store.publish(INDEX, "packages", 1)
        request = SearchRequest.model_validate({"query": "package59", "mode": "keyword"})
        results = search(store, SearchTarget(INDEX, embedder), request).results
        request = SearchRequest.model_validate({"query": "packages below", "mode": "keyword"})
        first = search(store, SearchTarget(INDEX, embedder), request).results
        listed = document_chunks(store, INDEX, "packages", limit=500).chunks
    assert "\npackage59 | 413 KiB | tool number 59 of the set\n" in results[0].text
    assert results[0].table_header == "Package | Size | Description"
    assert first[0].chunk_index == 0 and first[0].table_header is None
    assert [chunk.table_header for chunk in listed] == [
        chunk.table_header or None for chunk in prepared.chunks
    ]
