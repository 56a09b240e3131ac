"""What OpenAI documents about its embedding models, and the size to ask a model for."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """What the provider documents about one embedding model."""

    dimensions: int
    """Native vector size."""
    max_input_tokens: int
    """Longest input the model accepts, in tokens."""
    shortenable: bool
    """Whether the API accepts `dimensions` to return shorter (Matryoshka) vectors."""


KNOWN_MODELS: dict[str, ModelSpec] = {
    "text-embedding-3-small": ModelSpec(1536, 8191, shortenable=True),
    "text-embedding-3-large": ModelSpec(3072, 8191, shortenable=True),
    "text-embedding-ada-002": ModelSpec(1536, 8191, shortenable=False),
}
"""OpenAI's embedding models; other models are sized from their first response."""


@dataclass(frozen=True, slots=True)
class Sizing:
    """How an embedder sizes `model`'s vectors and inputs."""

    dimensions: int | None
    """The vector size, None until an unknown model's first reply tells it."""
    send_dimensions: int | None
    """The `dimensions` to send in each request (None: send none, take the native size)."""
    max_input_tokens: int | None
    """Longest input, in tokens (None: unknown, no limit applied)."""


def sizing(model: str, dimensions: int | None, max_input_tokens: int | None) -> Sizing:
    """Size `model` for `dimensions` (None: native): `dimensions` is sent for a shortenable
    model asking for fewer than its native size, and for an unknown model whenever given;
    ValueError for a known model that cannot produce that size."""
    spec = KNOWN_MODELS.get(model)
    if spec is None:
        return Sizing(dimensions, dimensions, max_input_tokens)
    send = None
    if dimensions is not None and dimensions != spec.dimensions:
        if not spec.shortenable or dimensions > spec.dimensions:
            raise ValueError(
                f"{model} returns {spec.dimensions} dimensions; {dimensions} unsupported"
            )
        send = dimensions
    return Sizing(dimensions or spec.dimensions, send, max_input_tokens or spec.max_input_tokens)
