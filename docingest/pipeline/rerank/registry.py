"""The re-rankers by provider name, and `build_reranker`.

As with the embedders (`docingest.pipeline.embedders.registry`), a provider is a factory registered
under the name an index's `rerank.provider` or `DOCINGEST_RERANK_PROVIDER` carries: adding one is a
`register_reranker` call. Built in: `cohere` (the Cohere-style `/rerank` of Cohere, Jina,
Voyage, vLLM, Infinity and LocalAI), `tei` (Hugging Face TEI) and `llm` (listwise, through any
OpenAI-compatible chat model). All three talk to `DOCINGEST_RERANK_URL` through `RerankHttp`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from docingest.pipeline.errors import InvalidRerank
from docingest.pipeline.rerank.base import Reranker
from docingest.pipeline.rerank.http import RerankEndpoint, RerankHttp
from docingest.pipeline.settings import Settings

if TYPE_CHECKING:
    from redis import Redis

RerankerFactory = Callable[[str, Settings, "Redis | None"], Reranker]
"""Build a re-ranker for (model, settings, redis); `redis` shares the rate limit, if any."""

PROVIDERS: dict[str, RerankerFactory] = {}


def register_reranker(name: str, factory: RerankerFactory) -> None:
    """Make `factory` build the re-rankers of provider `name` (replacing any before it)."""
    PROVIDERS[name] = factory


def reranker_factory(name: str) -> RerankerFactory:
    """Return the factory registered as `name`; `InvalidRerank`, naming the known, if none."""
    try:
        return PROVIDERS[name]
    except KeyError:
        known = ", ".join(sorted(PROVIDERS))
        raise InvalidRerank(
            f"Unknown rerank provider '{name}'; the known providers are: {known}."
        ) from None


def build_reranker(
    provider: str, model: str, *, settings: Settings, redis: Redis | None = None
) -> Reranker:
    """Build the re-ranker of `provider` for `model`; `RerankFailed` if no URL is set."""
    return reranker_factory(provider)(model, settings, redis)


def _cohere(model: str, settings: Settings, redis: Redis | None) -> Reranker:
    from docingest.pipeline.rerank.cohere import CohereReranker

    return CohereReranker(
        RerankHttp(RerankEndpoint.from_settings(settings), redis=redis), model=model
    )


def _tei(model: str, settings: Settings, redis: Redis | None) -> Reranker:
    from docingest.pipeline.rerank.tei import TeiReranker

    return TeiReranker(RerankHttp(RerankEndpoint.from_settings(settings), redis=redis), model=model)


def _llm(model: str, settings: Settings, redis: Redis | None) -> Reranker:
    from docingest.pipeline.rerank.llm import LlmReranker

    return LlmReranker(RerankHttp(RerankEndpoint.from_settings(settings), redis=redis), model=model)


register_reranker("cohere", _cohere)
register_reranker("tei", _tei)
register_reranker("llm", _llm)
