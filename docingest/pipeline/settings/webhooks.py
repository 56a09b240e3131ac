"""The webhook settings (`DOCINGEST_WEBHOOK_*`), a base of `docingest.pipeline.settings.Settings`.

In their own module, as the rerank settings are, only to keep the settings module short:
`Settings` inherits them, and the configuration reference shows them with the rest.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings


class WebhookSettings(BaseSettings):
    """Which webhook URLs are allowed, and how deliveries are sent and retried."""

    webhook_allow_private: bool = False
    """Allow webhook and callback URLs whose host resolves to a loopback, link-local, private,
    multicast or unspecified address. Off, such a URL is refused at PUT, at upload and again
    at each delivery, so webhooks are no path into the deployment's own network."""

    webhook_timeout_seconds: float = Field(default=10.0, gt=0, le=60)
    """How long a receiver has to answer a delivery with a 2xx; later counts as a failure."""

    webhook_retry_hours: float = Field(default=24.0, gt=0)
    """How long a delivery is retried before it is marked failed (the attempt that ends it
    comes at or after this age)."""

    webhook_backoff_base_seconds: float = Field(default=10.0, gt=0)
    """Delay before the first retry; it doubles with each failed attempt, with jitter."""

    webhook_backoff_max_seconds: float = Field(default=3600.0, gt=0)
    """Longest delay between two attempts."""

    webhook_concurrency: int = Field(default=8, gt=0, le=256)
    """Deliveries one dispatcher (one per `serve` or `worker` process) sends at once."""

    webhook_target_concurrency: int = Field(default=4, gt=0, le=256)
    """Deliveries one dispatcher sends at once to one receiver (scheme, host and port), so a
    receiver that hangs holds only these senders; receivers slow to answer share at most half
    of `webhook_concurrency` between them."""

    webhook_log_size: int = Field(default=100, gt=0, le=10_000)
    """Recent deliveries kept per webhook for `GET .../webhooks/{name}/deliveries`."""

    webhook_dispatcher: bool = True
    """Run a webhook dispatcher in `docingest serve` and `docingest worker`."""
