"""The vectors of each window of one indexing run: keyword vectors, and dense vectors reused
from the stored versions, repeated from earlier windows, or embedded.

A text repeated across a document (a DOCX's boilerplate, a form's field labels) is embedded
once per document, as it was before windows: the run remembers the hash of every text it has
embedded (hashes only, ~100 bytes a chunk, not vectors), keeps the last window's vectors (that
window may still be on its way to the store), and reads older ones back from this version's
staged points, which the writer has stored by then (`BackgroundWriter.put` returns once the
previous window is written).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pipeline.chunk_vectors import embed_missing, keyword_text, text_hash
from pipeline.chunking import Chunk
from pipeline.embedders.base import Embedder
from pipeline.sparse import SparseTerms, average_length, encode_document
from pipeline.store import IndexConfig

VectorLookup = Callable[[int, list[str]], dict[str, np.ndarray]]
"""(chunks before a window, the window's text hashes) → reusable dense vectors by text hash."""
StagedLookup = Callable[[list[str]], dict[str, np.ndarray]]
"""Text hashes → the dense vectors of this version's staged points with those texts."""


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
    slice_size: int
    """Texts per `embed_documents` call."""
    reusable: VectorLookup
    staged: StagedLookup
    seen: set[str] = field(default_factory=set)
    """Hashes of the texts this run has given a vector, in earlier windows."""
    last: dict[str, np.ndarray] = field(default_factory=dict)
    """The previous window's dense vectors."""

    def window(
        self,
        chunks: list[Chunk],
        *,
        base: int,
        on_progress: Callable[[int, int], None],
        cancelled: Callable[[], bool],
    ) -> Window:
        """Sparse-encode `chunks` (the window after `base` chunks) and give each text a dense
        vector; `on_progress` and `cancelled` as in `embed_missing`."""
        hashes = [text_hash(chunk.text) for chunk in chunks]
        chunking = self.config.chunking
        avg_len = average_length(chunking.chunk_size, chunking.unit)
        sparse = [encode_document(keyword_text(chunk), avg_len=avg_len) for chunk in chunks]
        reusable = self.reusable(base, hashes)
        known = dict(reusable)
        repeated = {digest for digest in hashes if digest in self.seen and digest not in known}
        known.update({digest: self.last[digest] for digest in repeated if digest in self.last})
        if older := [digest for digest in repeated if digest not in known]:
            known.update(self.staged(older))
        dense = embed_missing(
            chunks,
            hashes,
            known,
            embedder=self.embedder,
            slice_size=self.slice_size,
            on_progress=on_progress,
            cancelled=cancelled,
        )
        self.seen.update(hashes)
        self.last = {digest: dense[digest] for digest in hashes}
        reused = sum(1 for digest in hashes if digest in reusable)
        return Window(chunks, hashes, sparse, dense, reused)
