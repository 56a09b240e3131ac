"""The vectors of each window of one indexing run: keyword vectors, and dense vectors reused
from the stored versions, repeated from a recent window, or embedded.

A text repeated across a document (a DOCX's boilerplate, a form's field labels) is embedded
once while it stays among the run's recent vectors: the last REPEAT_CACHE_BYTES of vectors
it used, least recently used out first. A repeat older than that is embedded again. Reading
it back from this version's staged points instead cost more than embedding it with a fast
embedder (BENCHMARKS.md, "Extraction overlapping embedding").
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from docingest.pipeline.chunking import Chunk
from docingest.pipeline.embedders.base import Embedder
from docingest.pipeline.indexing.chunk_vectors import (
    dense_text,
    embed_missing,
    embedding_text,
    keyword_text,
    text_hash,
)
from docingest.pipeline.sparse import SparseTerms, average_length, encode_document
from docingest.pipeline.store import IndexConfig

VectorLookup = Callable[[int, list[str]], dict[str, np.ndarray]]
"""(chunks before a window, the window's text hashes) → reusable dense vectors by text hash."""
REPEAT_CACHE_BYTES = 32 * 2**20
"""Dense vectors a run keeps for repeated texts: 5,461 at 1,536 dimensions, 21,845 at 384."""


@dataclass(frozen=True, slots=True)
class Window:
    """One window's chunks with their text hashes and vectors."""

    chunks: list[Chunk]
    hashes: list[str]
    sparse: list[SparseTerms]
    dense: dict[str, np.ndarray]
    """Text hash → dense vector, for every hash in `hashes`."""
    reused: int
    """Chunks whose vector came from a stored version (not from this run's own windows)."""


@dataclass(slots=True)
class WindowVectors:
    """How one run gets each window's vectors."""

    config: IndexConfig
    embedder: Embedder
    size: int
    """Most chunks in a window: the texts of one `embed_documents` call, at most."""
    reusable: VectorLookup
    title: str | None = None
    """The document's title, for contextual headers (`document_title`)."""
    recent: OrderedDict[str, np.ndarray] = field(default_factory=OrderedDict)
    """The vectors this run used last, by text hash, least recently used first."""

    @property
    def capacity(self) -> int:
        """How many vectors `recent` keeps: REPEAT_CACHE_BYTES of them."""
        return max(REPEAT_CACHE_BYTES // (4 * self.embedder.dimensions), self.size)

    def window(
        self,
        chunks: list[Chunk],
        *,
        base: int,
        on_progress: Callable[[int, int], None],
    ) -> Window:
        """Sparse-encode `chunks` (the window after `base` chunks) and give each text a dense
        vector; `on_progress` as in `embed_missing`."""
        if self.config.contextual_headers:  # the hash keys reuse: it covers the header too
            texts = [embedding_text(chunk, self.title) for chunk in chunks]
        else:
            texts = [dense_text(chunk) for chunk in chunks]
        hashes = [text_hash(text) for text in texts]
        chunking = self.config.chunking
        avg_len = average_length(chunking.chunk_size, chunking.unit)
        sparse = [encode_document(keyword_text(chunk), avg_len=avg_len) for chunk in chunks]
        reusable = self.reusable(base, hashes)
        recent = self.recent
        known = {digest: recent[digest] for digest in hashes if digest in recent}
        known.update(reusable)
        dense = embed_missing(
            texts,
            hashes,
            known,
            embedder=self.embedder,
            on_progress=on_progress,
        )
        for digest in hashes:
            recent[digest] = dense[digest]
            recent.move_to_end(digest)
        while len(recent) > self.capacity:
            recent.popitem(last=False)
        reused = sum(1 for digest in hashes if digest in reusable)
        return Window(chunks, hashes, sparse, dense, reused)
