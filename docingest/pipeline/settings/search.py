"""The settings that act on each search (`DOCINGEST_HYBRID_*`, `DOCINGEST_QUERY_EMBEDDING_*`), a
base of `docingest.pipeline.settings.Settings`.

Kept in their own module only so that the settings module stays under the module-size
limit; they are read, validated and documented with the rest (`Settings` inherits them, and
the docs' configuration reference and `.env.example` are rendered from them).
They may change at any time: they act on each search.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings


class SearchSettings(BaseSettings):
    """How hybrid search fuses its dense and keyword lists
    (`docingest.pipeline.search.candidates`), and how long a search's query embedding may
    take (`docingest.pipeline.embedders.bounded`)."""

    hybrid_fusion: Literal["convex", "rrf"] = "convex"
    """A convex combination of the lists' normalised scores, or Reciprocal Rank Fusion."""

    hybrid_vector_weight: float = Field(default=0.45, ge=0.0, le=1.0)
    """The dense list's weight in the convex combination; the keyword list's is 1 minus it
    (BENCHMARKS.md, "Hybrid fusion")."""

    query_embedding_concurrency: int = Field(default=8, ge=1, le=1000)
    """Query embeddings under way at once per provider in one API process; a search that
    finds them all taken for half a second answers 503 `embedding_busy`, so an embedding
    endpoint that hangs holds at most this many of the API's worker threads
    (RELIABILITY.md, "Embedding endpoints")."""

    query_embedding_deadline_seconds: float = Field(default=10.0, gt=0)
    """Total time a search's query embedding may take, retries included, before the search
    answers 503 `embedding_failed` (documents keep `embedding_deadline_seconds`)."""
