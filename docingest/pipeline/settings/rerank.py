"""The rerank settings (`DOCINGEST_RERANK_*`), a base of `docingest.pipeline.settings.Settings`.

Kept in their own module only so that the settings module stays under the module-size
limit; they are read, validated and documented with the rest (`Settings` inherits them, and
the docs' configuration reference and `.env.example` are rendered from them).
Unlike the embedding, they may change at any time.
"""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings


class RerankSettings(BaseSettings):
    """Where the re-ranker is and how long a search waits for it."""

    rerank_provider: str | None = None
    """Re-ranker (`cohere`, `tei`, `llm`, or registered) where an index or request names none."""

    rerank_url: str | None = None
    """Base URL of the re-ranker: `{url}/rerank` (cohere, tei), `{url}/chat/completions` (llm)."""

    rerank_api_key: SecretStr | None = None
    """Bearer key of the re-ranker; None sends none."""

    rerank_model: str | None = None
    """Default model name sent to the re-ranker (an index's `rerank.model` overrides it)."""

    rerank_candidates: int = Field(default=50, ge=1, le=1000)
    """First-stage results re-ranked when neither the index nor the request says (>= top_k)."""

    rerank_timeout_seconds: float = Field(default=5.0, gt=0)
    """Timeout of one rerank request."""

    rerank_deadline_seconds: float = Field(default=8.0, gt=0)
    """Time one search's rerank may take, retries included; then first-stage order."""

    rerank_max_attempts: int = Field(default=2, gt=0)
    """Attempts per rerank (first try included), within the deadline."""

    rerank_concurrency: int = Field(default=8, ge=1, le=1000)
    """Rerank requests one process sends at once per provider; a search finding them all under
    way is answered at once in first-stage order (`rerank_busy`), so a re-ranker that hangs
    holds at most this many of the API's threads."""

    rerank_requests_per_minute: int = Field(default=0, ge=0)
    """Rerank requests per minute per credential, shared by every process; 0 = no limit."""
