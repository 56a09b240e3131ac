"""One interface for every embedding provider, and a query cache (the providers by name are
in `docingest.pipeline.embedders.registry`).

An index remembers its `EmbeddingConfig`; documents and queries of that index are always
embedded by the embedder built from it. Every vector an `Embedder` returns is unit-length
(float32), so cosine similarity is a dot product and scores are comparable across providers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from docingest.pipeline.settings import Settings

ProgressCallback = Callable[[int], None]
"""Called after each finished batch with the number of inputs embedded so far (monotonic)."""


class EmbeddingConfig(BaseModel):
    """Which model embeds an index: fixed once the index holds vectors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = "local"
    """The name of a registered provider (`docingest.pipeline.embedders.registry`), checked where
    the embedder is built: `local`, `openai`, or one added with `register_provider`."""
    model: str = "all-MiniLM-L6-v2"
    dimensions: int | None = Field(default=None, gt=0, le=65536)

    @classmethod
    def from_settings(cls, settings: Settings) -> EmbeddingConfig:
        return cls(
            provider=settings.embedding_provider,
            model=settings.embedding_model,
            dimensions=settings.embedding_dimensions,
        )


class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of `dimensions` components."""

    provider: str
    model: str
    dimensions: int
    max_batch: int

    def embed_documents(
        self, texts: Sequence[str], on_progress: ProgressCallback | None = None
    ) -> np.ndarray:
        """Return one vector per text, in input order, shape (len(texts), dimensions)."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Return the vector of a search query (some models embed queries differently)."""
        ...


@dataclass
class EmbeddingCounters:
    """Process-wide counts for the metrics endpoint; safe to bump from many threads."""

    requests: int = 0
    retries: int = 0
    failures: int = 0
    inputs: int = 0
    tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **amounts: int) -> None:
        with self._lock:
            for name, amount in amounts.items():
                setattr(self, name, getattr(self, name) + amount)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {
                "requests": self.requests,
                "retries": self.retries,
                "failures": self.failures,
                "inputs": self.inputs,
                "tokens": self.tokens,
            }


COUNTERS = EmbeddingCounters()


def unit_normalise(vectors: np.ndarray) -> np.ndarray:
    """Scale each row to length 1 (a zero row stays zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class QueryCache:
    """LRU of query vectors keyed by (provider, model, dimensions, text)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[tuple[str, str, int, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_or_embed(self, embedder: Embedder, text: str) -> np.ndarray:
        key = (embedder.provider, embedder.model, embedder.dimensions, text)
        with self._lock:
            if (vector := self._items.get(key)) is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return vector
            self.misses += 1
        vector = embedder.embed_query(text)
        vector.setflags(write=False)
        if self.capacity:
            with self._lock:
                self._items[key] = vector
                self._items.move_to_end(key)
                while len(self._items) > self.capacity:
                    self._items.popitem(last=False)
        return vector


def check_embedder_matches(index: str, wanted: EmbeddingConfig, embedder: Embedder) -> None:
    """Refuse to mix vectors of two models in one index (a caller's bug, never bad input)."""
    if (embedder.provider, embedder.model, embedder.dimensions) != (
        wanted.provider,
        wanted.model,
        wanted.dimensions,
    ):
        raise ValueError(
            f"index '{index}' is embedded with {wanted.provider}/{wanted.model} "
            f"({wanted.dimensions}); the embedder given is {embedder.provider}/{embedder.model} "
            f"({embedder.dimensions})"
        )
