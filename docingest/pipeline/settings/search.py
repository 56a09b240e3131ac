"""The hybrid fusion settings (`DOCINGEST_HYBRID_*`), a base of
`docingest.pipeline.settings.Settings`.

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
    (`docingest.pipeline.search.candidates`)."""

    hybrid_fusion: Literal["convex", "rrf"] = "convex"
    """A convex combination of the lists' normalised scores, or Reciprocal Rank Fusion."""

    hybrid_vector_weight: float = Field(default=0.45, ge=0.0, le=1.0)
    """The dense list's weight in the convex combination; the keyword list's is 1 minus it
    (BENCHMARKS.md, "Hybrid fusion")."""
