"""A window's vectors: reused from a stored version, repeated from the recent ones, embedded."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from docingest.pipeline.chunking import Chunk, ChunkingSpec
from docingest.pipeline.embedders.base import EmbeddingConfig, ProgressCallback
from docingest.pipeline.indexing.chunk_vectors import document_title, text_hash
from docingest.pipeline.indexing.window_vectors import REPEAT_CACHE_BYTES, Window, WindowVectors
from docingest.pipeline.settings import ChunkUnit
from docingest.pipeline.sparse import encode_query
from docingest.pipeline.store import IndexConfig

DIMENSIONS = 16


def _axis(text: str, dimensions: int, *, shift: int = 0) -> int:
    return (int(hashlib.sha256(text.encode()).hexdigest(), 16) + shift) % dimensions


class CountingEmbedder:
    """Embeds each text as the unit vector along an axis its hash picks; keeps every batch.

    `np.zeros` leaves the pages of a wide vector unwritten, so even vectors of millions of
    dimensions (a recent cache of a few entries) cost little memory."""

    provider = "counting"
    model = "axis-by-hash"
    max_batch = 64

    def __init__(self, dimensions: int = DIMENSIONS) -> None:
        self.dimensions = dimensions
        self.batches: list[list[str]] = []

    @property
    def embedded(self) -> list[str]:
        """Every text embedded so far, in order."""
        return [text for batch in self.batches for text in batch]

    def embed_documents(
        self, texts: Sequence[str], on_progress: ProgressCallback | None = None
    ) -> np.ndarray:
        self.batches.append(list(texts))
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row, _axis(text, self.dimensions)] = 1.0
        if on_progress is not None:
            on_progress(len(texts))
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


class StoredVersion:
    """The vectors of a stored version by text hash, with every lookup it answered."""

    def __init__(self, texts: Sequence[str] = ()) -> None:
        self.vectors: dict[str, np.ndarray] = {}
        for text in texts:  # an axis the embedder would not pick, to tell the two apart
            vector = np.zeros(DIMENSIONS, dtype=np.float32)
            vector[_axis(text, DIMENSIONS, shift=1)] = 1.0
            self.vectors[text_hash(text)] = vector
        self.lookups: list[tuple[int, list[str]]] = []

    def lookup(self, base: int, hashes: list[str]) -> dict[str, np.ndarray]:
        self.lookups.append((base, list(hashes)))
        return {digest: self.vectors[digest] for digest in hashes if digest in self.vectors}


CONFIG = IndexConfig(
    embedding=EmbeddingConfig(provider="local", model="axis-by-hash", dimensions=DIMENSIONS),
    chunking=ChunkingSpec(chunk_size=200, chunk_overlap=0, unit=ChunkUnit.CHARS),
)
TEXTS = {
    name: f"The {name} paragraph: {detail}."
    for name, detail in [
        ("a", "glaciers retreat up the northern valley"),
        ("b", "the bakery proofs its sourdough overnight"),
        ("c", "volunteers count cranes at the wetland"),
        ("d", "the council repaves the cycle lanes"),
        ("e", "a quartet rehearses in the old chapel"),
    ]
}


def _chunks(names: str, *, base: int = 0, headings: tuple[str, ...] = ()) -> list[Chunk]:
    """Chunks of the texts named by the letters of `names`, numbered from `base`."""
    chunks, offset = [], 0
    for index, name in enumerate(names, start=base):
        text = TEXTS[name]
        chunks.append(Chunk(index, text, offset, offset + len(text), None, None, headings))
        offset += len(text) + 2
    return chunks


def _vectors(
    embedder: CountingEmbedder, stored: StoredVersion | None = None, *, size: int = 8
) -> WindowVectors:
    lookup = (stored or StoredVersion()).lookup
    return WindowVectors(config=CONFIG, embedder=embedder, size=size, reusable=lookup)


def _window(vectors: WindowVectors, names: str, *, base: int = 0) -> Window:
    return vectors.window(
        _chunks(names, base=base), base=base, on_progress=lambda done, total: None
    )


def _embedded_vector(text: str) -> np.ndarray:
    vector = np.zeros(DIMENSIONS, dtype=np.float32)
    vector[_axis(text, DIMENSIONS)] = 1.0
    return vector


def test_stored_vectors_are_reused_and_only_the_rest_embedded() -> None:
    embedder, stored = CountingEmbedder(), StoredVersion([TEXTS["b"]])
    window = _window(_vectors(embedder, stored), "abc", base=40)
    assert embedder.embedded == [TEXTS["a"], TEXTS["c"]]
    assert stored.lookups == [(40, window.hashes)]  # the chunks before it, and its hashes
    assert window.hashes == [text_hash(TEXTS[name]) for name in "abc"]
    assert set(window.dense) == set(window.hashes)
    assert np.array_equal(window.dense[text_hash(TEXTS["b"])], stored.vectors[window.hashes[1]])
    assert np.array_equal(window.dense[window.hashes[0]], _embedded_vector(TEXTS["a"]))
    assert window.reused == 1


def test_reused_counts_chunks_whose_vector_a_stored_version_gave() -> None:
    embedder = CountingEmbedder()
    vectors = _vectors(embedder, StoredVersion([TEXTS["a"]]))
    assert _window(vectors, "aab").reused == 2  # chunks, not distinct texts
    # A text from the run's own earlier window is a repeat, not a reuse.
    later = _window(vectors, "bc", base=3)
    assert later.reused == 0
    assert embedder.embedded == [TEXTS["b"], TEXTS["c"]]


def test_a_repeat_is_embedded_once_within_and_across_windows() -> None:
    embedder = CountingEmbedder()
    vectors = _vectors(embedder)
    first = _window(vectors, "abab")
    second = _window(vectors, "bcb", base=4)
    assert embedder.embedded == [TEXTS["a"], TEXTS["b"], TEXTS["c"]]
    assert (first.reused, second.reused) == (0, 0)
    digest = text_hash(TEXTS["b"])
    assert np.array_equal(second.dense[digest], first.dense[digest])


def test_the_recent_vectors_fill_repeat_cache_bytes() -> None:
    assert _vectors(CountingEmbedder(384)).capacity == REPEAT_CACHE_BYTES // (4 * 384)
    wide = REPEAT_CACHE_BYTES // (4 * 3)  # three float32 vectors fill the cache
    assert _vectors(CountingEmbedder(wide), size=2).capacity == 3
    # Never fewer than one window's texts.
    assert _vectors(CountingEmbedder(wide), size=5).capacity == 5


def test_the_least_recently_used_vector_leaves_first() -> None:
    embedder = CountingEmbedder(REPEAT_CACHE_BYTES // (4 * 3))  # the cache holds three
    vectors = _vectors(embedder, size=1)
    _window(vectors, "abc")
    _window(vectors, "a", base=3)  # a repeat: `a` is now the most recently used
    _window(vectors, "d", base=4)  # the cache is full: `b`, the least recently used, leaves
    assert len(vectors.recent) == 3
    before = len(embedder.embedded)
    _window(vectors, "cab", base=5)
    assert embedder.embedded[before:] == [TEXTS["b"]]  # `c` and `a` were kept, `b` was not


def test_every_chunk_gets_a_keyword_vector_with_its_headings() -> None:
    stored = StoredVersion([TEXTS["a"]])
    chunks = _chunks("ab", headings=("Hydrology",))
    window = _vectors(CountingEmbedder(), stored).window(
        chunks, base=0, on_progress=lambda done, total: None
    )
    assert len(window.sparse) == len(chunks)  # the reused chunk's too
    heading = set(encode_query("Hydrology").indices)
    for chunk, terms in zip(chunks, window.sparse, strict=True):
        assert heading <= set(terms.indices)
        assert set(encode_query(chunk.text).indices) <= set(terms.indices)
        assert len(terms.values) == len(terms.indices)
        assert all(value > 0 for value in terms.values)


def test_progress_counts_chunks_with_their_vector() -> None:
    embedder = CountingEmbedder()
    vectors = _vectors(embedder, StoredVersion([TEXTS["a"]]))
    progress: list[tuple[int, int]] = []
    vectors.window(_chunks("abcc"), base=0, on_progress=lambda *step: progress.append(step))
    assert progress[0] == (1, 4)  # the reused chunk has its vector from the start
    assert progress[-1] == (4, 4)
    assert progress == sorted(progress)
    assert embedder.batches == [[TEXTS["b"], TEXTS["c"]]]  # the window's missing texts, once


def test_contextual_headers_embed_the_title_and_headings_and_key_reuse_by_them() -> None:
    embedder = CountingEmbedder()
    config = CONFIG.model_copy(update={"contextual_headers": True})
    headed = WindowVectors(
        config=config, embedder=embedder, size=8, reusable=StoredVersion().lookup,
        title="Handbook",
    )  # fmt: skip
    chunks = _chunks("ab", headings=("Handbook", "Leave", "Parental"))
    window = headed.window(chunks, base=0, on_progress=lambda done, total: None)
    expected = [f"Handbook\nLeave\nParental\n{TEXTS[name]}" for name in "ab"]
    assert embedder.embedded == expected  # the title once, though it is a heading too
    assert window.hashes == [text_hash(text) for text in expected]
    # The same chunk under another heading is another text: embedded again, not reused.
    moved = headed.window(
        _chunks("a", base=2, headings=("Handbook", "Pay")), base=2,
        on_progress=lambda done, total: None,
    )  # fmt: skip
    assert embedder.embedded[-1] == f"Handbook\nPay\n{TEXTS['a']}"
    assert moved.hashes != window.hashes[:1]


def test_the_title_is_the_uploads_or_the_file_name() -> None:
    assert document_title("reports/q3 summary.final.pdf", {}) == "q3 summary.final"
    assert document_title("C:\\docs\\plan.docx", {"title": "  "}) == "plan"
    assert document_title("a.txt", {"title": "Annual report"}) == "Annual report"
    assert document_title(".bashrc", {}) == ".bashrc"
    assert document_title(None, {}) is None
