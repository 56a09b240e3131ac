"""Providers by name: one registered by the caller embeds and searches a real file end to end
through `Pipeline`, and an unknown name is refused with the names that are known."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from redis import Redis

from docingest.pipeline.embedders.base import (
    Embedder,
    EmbeddingConfig,
    ProgressCallback,
    unit_normalise,
)
from docingest.pipeline.embedders.registry import PROVIDERS, build_embedder, register_provider
from docingest.pipeline.errors import UnknownProvider
from docingest.pipeline.facade import open_pipeline
from docingest.pipeline.settings import Settings
from tests.support.paths import EXAMPLES_DIR
from tests.support.redis_db import purge_keys, unique_prefix
from tests.support.settings import service_settings

PROVIDER = "hashed"
DIMENSIONS = 1024
QUERY = "Local execution capabilities for sensitive data and air-gapped environments"


class HashedEmbedder:
    """Words hashed into `dimensions` buckets and counted: deterministic, and a text is
    closest to the texts that share its words (what the search below relies on)."""

    provider = PROVIDER
    max_batch = 16

    def __init__(self, model: str, dimensions: int) -> None:
        self.model = model
        self.dimensions = dimensions
        self.embedded: list[str] = []

    def embed_documents(
        self, texts: Sequence[str], on_progress: ProgressCallback | None = None
    ) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                vectors[row, int.from_bytes(digest, "big") % self.dimensions] += 1.0
        self.embedded.extend(texts)
        if on_progress is not None:
            on_progress(len(texts))
        return unit_normalise(vectors)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


@pytest.fixture
def hashed_provider() -> Iterator[list[HashedEmbedder]]:
    """Register `hashed` for the test (unregistered afterwards); the embedders it built."""
    built: list[HashedEmbedder] = []

    def factory(config: EmbeddingConfig, settings: Settings, redis: Redis | None) -> Embedder:
        embedder = HashedEmbedder(config.model, config.dimensions or DIMENSIONS)
        built.append(embedder)
        return embedder

    register_provider(PROVIDER, factory)
    try:
        yield built
    finally:
        del PROVIDERS[PROVIDER]


@pytest.fixture
def prefix() -> Iterator[str]:
    """A Redis key prefix of the test's own on the test DB, its keys deleted afterwards."""
    prefix = unique_prefix("registry")
    try:
        yield prefix
    finally:
        purge_keys(prefix)


def test_a_registered_provider_embeds_and_searches_a_real_file(
    hashed_provider: list[HashedEmbedder], prefix: str, tmp_path: Path
) -> None:
    settings = service_settings(
        tmp_path, prefix, None, embedding_provider=PROVIDER, embedding_model="words-v1"
    )
    with open_pipeline(settings) as docs:
        result = docs.ingest("notes", EXAMPLES_DIR / "docling-README.md")
        assert result.chunks > 1
        (embedder,) = hashed_provider  # built once, for the index and its queries
        assert len(embedder.embedded) == result.chunks
        found = docs.search("notes", QUERY, mode="vector")
        assert embedder.embedded[-1] == QUERY
        top = found.results[0]
        assert top.document_id == "docling-README.md" and "air-gapped" in top.text
        assert top.scores.vector == top.score and top.scores.keyword is None
        hybrid = docs.search("notes", QUERY, top_k=3)
        assert "air-gapped" in hybrid.results[0].text
    config = EmbeddingConfig(provider=PROVIDER, model="words-v1", dimensions=DIMENSIONS)
    assert config.provider == settings.embedding_provider == PROVIDER


def test_an_unknown_provider_is_refused_with_the_known_names() -> None:
    with pytest.raises(UnknownProvider, match=r"'cohere'.*: local, openai\.$") as raised:
        build_embedder(EmbeddingConfig(provider="cohere"), settings=Settings())
    assert raised.value.code == "validation_error"


def test_a_registered_provider_is_among_the_known_names(
    hashed_provider: list[HashedEmbedder],
) -> None:
    with pytest.raises(UnknownProvider, match=r": hashed, local, openai\.$"):
        build_embedder(EmbeddingConfig(provider="cohere"), settings=Settings())
    built = build_embedder(EmbeddingConfig(provider=PROVIDER), settings=Settings())
    assert built is hashed_provider[0] and built.dimensions == DIMENSIONS


def test_a_pipeline_whose_default_provider_is_unknown_refuses_to_ingest(
    prefix: str, tmp_path: Path
) -> None:
    settings = service_settings(tmp_path, prefix, None, embedding_provider="cohere")
    with open_pipeline(settings) as docs, pytest.raises(UnknownProvider, match="local, openai"):
        docs.ingest("notes", EXAMPLES_DIR / "docling-README.md")
