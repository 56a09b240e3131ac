"""The embedding providers by name, and `build_embedder`, which builds an index's embedder.

A provider is a factory registered under the name an `EmbeddingConfig` carries, as simonw/llm's
`register_embedding_models` hook does: adding one is a `register_provider` call, not another
branch. The name is a plain string everywhere (settings, index configs) and is checked here,
when an embedder is built, so a provider registered by the caller is as nameable as the two
built in. The factories import their provider's module when called, so neither onnxruntime nor
openai is imported until an embedder of that kind is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from docingest.pipeline.embedders.base import Embedder, EmbeddingConfig
from docingest.pipeline.errors import UnknownProvider
from docingest.pipeline.settings import Settings

if TYPE_CHECKING:
    from redis import Redis

EmbedderFactory = Callable[[EmbeddingConfig, Settings, "Redis | None"], Embedder]
"""Build an embedder for (config, settings, redis); `redis` shares rate limits, if any."""

PROVIDERS: dict[str, EmbedderFactory] = {}
"""Provider name → factory; `EmbeddingConfig.provider` names one of these."""


def register_provider(name: str, factory: EmbedderFactory) -> None:
    """Make `factory` build the embedders of provider `name` (replacing any before it)."""
    PROVIDERS[name] = factory


def provider_factory(name: str) -> EmbedderFactory:
    """Return the factory registered as `name`; `UnknownProvider`, naming the known, if none."""
    try:
        return PROVIDERS[name]
    except KeyError:
        known = ", ".join(sorted(PROVIDERS))
        raise UnknownProvider(
            f"Unknown embedding provider '{name}'; the known providers are: {known}."
        ) from None


def build_embedder(
    config: EmbeddingConfig, *, settings: Settings, redis: Redis | None = None
) -> Embedder:
    """Build the embedder for `config`; `redis` enables the shared rate limiter."""
    return provider_factory(config.provider)(config, settings, redis)


def _local(config: EmbeddingConfig, settings: Settings, redis: Redis | None) -> Embedder:
    """The bundled ONNX model, run in this process (no rate limit: nothing is shared)."""
    from docingest.pipeline.embedders.local import LocalEmbedder

    return LocalEmbedder.load(
        model=config.model,
        dimensions=config.dimensions,
        threads=settings.local_model_threads,
        max_batch_tokens=settings.local_model_batch_tokens,
    )


def _openai(config: EmbeddingConfig, settings: Settings, redis: Redis | None) -> Embedder:
    """OpenAI or any OpenAI-compatible `/v1/embeddings` server."""
    from docingest.pipeline.embedders.openai_compat import OpenAICompatibleEmbedder

    return OpenAICompatibleEmbedder.from_settings(
        model=config.model, dimensions=config.dimensions, settings=settings, redis=redis
    )


register_provider("local", _local)
register_provider("openai", _openai)
