"""Which re-ranker a search uses: the index's `rerank`, the request's `rerank`, the settings.

Precedence, field by field: the request (`{"model", "candidates", "fusion"}`), then the
index's `rerank` (`{"provider", "model", "candidates", "fusion"}`), then the server's
settings. Rerank is on when the request says `true` or gives an object, or, when the request
says nothing (`null`), when the index has a `rerank`; `false` turns it off. Unlike the
embedding, all of this may change at any time: nothing stored depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from docingest.pipeline.errors import RerankFailed
from docingest.pipeline.settings import Settings

Fusion = Literal["replace", "rrf"]
"""How the rerank order is used: `replace` the first stage's (the default), or fuse the two
ranks with RRF. Chosen by measurement: BENCHMARKS.md, "Rerank: replace or fuse"."""

MAX_CANDIDATES = 1000
"""Most documents one rerank request may carry (Cohere's and Voyage's documented limit)."""


class RerankConfig(BaseModel):
    """An index's default second stage; a field left out takes the server's setting."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str | None = Field(default=None, min_length=1, max_length=64)
    model: str | None = Field(default=None, min_length=1, max_length=256)
    candidates: int | None = Field(default=None, ge=1, le=MAX_CANDIDATES)
    fusion: Fusion | None = None


class RerankOverride(BaseModel):
    """A request's `rerank` object: turn rerank on, with this model or depth."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str | None = Field(default=None, min_length=1, max_length=256)
    candidates: int | None = Field(default=None, ge=1, le=MAX_CANDIDATES)
    fusion: Fusion | None = None


@dataclass(frozen=True, slots=True)
class RerankDefaults:
    """The server's rerank settings, read once per search."""

    provider: str | None
    model: str | None
    candidates: int

    @classmethod
    def from_settings(cls, settings: Settings) -> RerankDefaults:
        return cls(settings.rerank_provider, settings.rerank_model, settings.rerank_candidates)


@dataclass(frozen=True, slots=True)
class RerankSpec:
    """A rerank to run: which provider and model, over how many first-stage results."""

    provider: str
    model: str
    candidates: int
    fusion: Fusion = "replace"


def resolve_rerank(
    requested: bool | RerankOverride | None,
    index: RerankConfig | None,
    defaults: RerankDefaults,
) -> RerankSpec | None:
    """Return the rerank a search asks for, or None when it asks for none.

    Raises `RerankFailed` (`rerank_not_configured`) when rerank is on but no provider is named
    by the index or the settings; the search then answers in first-stage order.
    """
    if requested is False or (requested is None and index is None):
        return None
    override = requested if isinstance(requested, RerankOverride) else RerankOverride()
    index = index or RerankConfig()
    provider = index.provider or defaults.provider
    if provider is None:
        raise RerankFailed(
            "rerank_not_configured",
            "Rerank was asked for, but neither the index's `rerank` nor "
            "DOCINGEST_RERANK_PROVIDER names a provider.",
        )
    model = override.model or index.model or defaults.model or ""
    candidates = override.candidates or index.candidates or defaults.candidates
    fusion = override.fusion or index.fusion or "replace"
    return RerankSpec(provider=provider, model=model, candidates=candidates, fusion=fusion)
