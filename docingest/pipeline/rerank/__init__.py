"""The second stage of a search: re-rankers by provider name, behind one retrying client."""

from docingest.pipeline.rerank.base import Reranker
from docingest.pipeline.rerank.config import (
    RerankConfig,
    RerankDefaults,
    RerankOverride,
    RerankSpec,
    resolve_rerank,
)
from docingest.pipeline.rerank.registry import build_reranker, register_reranker, reranker_factory

__all__ = [
    "RerankConfig",
    "RerankDefaults",
    "RerankOverride",
    "RerankSpec",
    "Reranker",
    "build_reranker",
    "register_reranker",
    "reranker_factory",
    "resolve_rerank",
]
