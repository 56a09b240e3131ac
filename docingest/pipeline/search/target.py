"""What a search runs against, decided once: an index that exists and the embedder of its own
model.

Every search goes through `resolve_target` (the service, the Python facade, the tests and the
benchmarks alike), so the index's config is read once, a missing index is `IndexNotFound` in
one place, and the query is embedded only by the model the index's vectors were made with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from docingest.pipeline.embedders.base import Embedder, EmbeddingConfig, check_embedder_matches
from docingest.pipeline.errors import IndexNotFound
from docingest.pipeline.rerank import RerankConfig
from docingest.pipeline.store import VectorStore
from docingest.pipeline.store.access import AccessMode
from docingest.pipeline.store.schema import FieldType

EmbedderFor = Callable[[EmbeddingConfig], Embedder]
"""Returns the embedder of an embedding config (`Services.embedder_for` caches them)."""


@dataclass(frozen=True, slots=True)
class SearchTarget:
    """An index that exists, and the embedder its config names; made by `resolve_target`."""

    index: str
    embedder: Embedder
    metadata_schema: Mapping[str, FieldType] | None = None
    """The index's declared metadata fields, which filters are checked against."""
    rerank: RerankConfig | None = None
    """The index's default second stage, as its config held when the search began."""
    access: AccessMode = "open"
    """The index's rule for documents without an access list, as its config held."""


def resolve_target(store: VectorStore, index: str, *, embedder_for: EmbedderFor) -> SearchTarget:
    """Read `index`'s config, raising `IndexNotFound` if there is none, and take its embedder
    from `embedder_for`, refused (ValueError, a caller's bug) unless it is the index's model."""
    config = store.index_config(index)
    if config is None:
        raise IndexNotFound(f"Index '{index}' does not exist.")
    embedder = embedder_for(config.embedding)
    check_embedder_matches(index, config.embedding, embedder)
    return SearchTarget(
        index=index,
        embedder=embedder,
        metadata_schema=config.metadata_schema,
        rerank=config.rerank,
        access=config.access,
    )
