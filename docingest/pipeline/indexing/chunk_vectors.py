"""The vectors of a document's chunks: dense ones reused by text hash or embedded, the text
each keyword (sparse) vector is built from, and the records that carry them to the store."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from docingest.pipeline.chunking import Chunk
from docingest.pipeline.embedders.base import Embedder
from docingest.pipeline.embedders.usage import record_reused
from docingest.pipeline.metadata import ocr_of_pages
from docingest.pipeline.sparse import SparseTerms
from docingest.pipeline.store import ChunkRecord, DocumentFields


def text_hash(text: str) -> str:
    """Return the sha256 hex digest of a chunk's text (the key of vector reuse)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def keyword_text(chunk: Chunk) -> str:
    """Return the text a chunk's keyword vector is built from: its heading path and text."""
    return "\n".join([*chunk.headings, dense_text(chunk)])


def dense_text(chunk: Chunk) -> str:
    """Return the chunk's text with the header row of the table it continues, if any
    (`Chunk.table_header`): a row of numbers means little without its columns' names."""
    return f"{chunk.table_header}\n{chunk.text}" if chunk.table_header else chunk.text


def document_title(filename: str | None, user_metadata: Mapping[str, Any]) -> str | None:
    """Return the title a contextual header names: the upload's `title` metadata, else the
    file's name without its extension. (A title the parser finds, e.g. a PDF's, is known only
    once the whole file is read, after the first chunks are embedded: a header must not
    depend on how far the parser had got.)"""
    title = user_metadata.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    if filename:
        stem = PurePosixPath(filename.replace("\\", "/")).name
        return stem.rsplit(".", 1)[0] if "." in stem[1:] else stem
    return None


def embedding_text(chunk: Chunk, title: str | None) -> str:
    """Return the text a chunk's dense vector is made from with contextual headers: its
    document's title and heading path, a line each, then the chunk (BENCHMARKS.md,
    "Contextual headers"). A heading equal to the title is not repeated."""
    header = [title] if title else []
    header += [heading for heading in chunk.headings if heading != title]
    return "\n".join([*header, dense_text(chunk)])


def embed_missing(
    texts: Sequence[str],
    hashes: Sequence[str],
    reusable: dict[str, np.ndarray],
    *,
    embedder: Embedder,
    on_progress: Callable[[int, int], None],
) -> dict[str, np.ndarray]:
    """Return text hash → vector for every text (a chunk's, or its `embedding_text`),
    embedding each missing text once, in one
    `embed_documents` call (the embedder batches and parallelises it); `on_progress(done,
    total)` counts chunks with a vector."""
    vectors = dict(reusable)
    missing: dict[str, str] = {}  # hash → text, first occurrence; repeated chunks embed once
    weight: dict[str, int] = {}  # chunks sharing each missing text
    for text, digest in zip(texts, hashes, strict=True):
        if digest not in vectors:
            missing.setdefault(digest, text)
            weight[digest] = weight.get(digest, 0) + 1
    total = len(texts)
    done = total - sum(weight.values())
    record_reused(total - len(missing))  # every chunk whose vector needed no request
    on_progress(done, total)
    if not missing:
        return vectors
    todo = list(missing.items())
    base = done

    def report(count: int) -> None:
        on_progress(base + count, total)  # ≤ the exact count below

    embedded = embedder.embed_documents([text for _, text in todo], on_progress=report)
    if embedded.shape != (len(todo), embedder.dimensions):
        raise ValueError(f"the embedder returned shape {embedded.shape} for {len(todo)}")
    for (digest, _), vector in zip(todo, embedded, strict=True):
        vectors[digest] = vector
        done += weight[digest]
    on_progress(done, total)
    return vectors


def chunk_records(
    chunks: Sequence[Chunk],
    *,
    hashes: Sequence[str],
    vectors: dict[str, np.ndarray],
    sparse: Sequence[SparseTerms],
    document_id: str,
    version: int,
    fields: DocumentFields,
    ocr: Any,
) -> list[ChunkRecord]:
    """Return the store's record of each chunk (`ocr`: the document's OCR metadata)."""
    return [
        ChunkRecord(
            document_id=document_id,
            version=version,
            chunk_index=chunk.index,
            text=chunk.text,
            text_hash=digest,
            start=chunk.start,
            end=chunk.end,
            page_start=chunk.page_start,
            page_end=chunk.page_end,
            headings=list(chunk.headings),
            dense=vectors[digest],
            sparse=terms,
            document=fields,
            ocr=ocr_of_pages(ocr, chunk.page_start, chunk.page_end),
            gap=chunk.gap,
            table_header=chunk.table_header,
        )
        for chunk, digest, terms in zip(chunks, hashes, sparse, strict=True)
    ]
