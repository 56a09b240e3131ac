"""v1.2 webhooks: subscriptions, their deliveries, and the event a receiver gets."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from docingest.models._base import Body, Model

WebhookEventName = Literal[
    "job.completed",
    "job.failed",
    "job.cancelled",
    "document.deleted",
    "source.sync.completed",
    "source.sync.failed",
    "source.sync.cancelled",
]
ALL_EVENTS: tuple[WebhookEventName, ...] = (
    "job.completed", "job.failed", "job.cancelled", "document.deleted",
    "source.sync.completed", "source.sync.failed", "source.sync.cancelled",
)  # fmt: skip
"""What a subscription gets when it names no events."""


class WebhookSubscription(Body):
    """The body of `PUT /v1/indexes/{index}/webhooks/{name}`."""

    url: str
    events: list[WebhookEventName] = Field(default_factory=lambda: list(ALL_EVENTS))
    secret: str | None = None
    """None: the server makes one and shows it once, in the answer's `secret`."""


class Webhook(Model):
    """A subscription as listed (never with its secret)."""

    name: str | None = None
    index: str | None = None
    url: str
    events: list[str] = Field(default_factory=list)
    created_at: str | None = None
    updated_at: str | None = None
    secret: str | None = None
    """Only in the answer to `PUT`, and only when the server generated the secret."""


class WebhookList(Model):
    webhooks: list[Webhook] = Field(default_factory=list)


class Delivery(Model):
    """One delivery attempt's record, as the deliveries log shows it."""

    id: str
    event: str | None = None
    document_id: str | None = None
    job_id: str | None = None
    status: str | None = None
    attempts: int = 0
    created_at: str | None = None
    last_attempt_at: str | None = None
    next_attempt_at: str | None = None
    finished_at: str | None = None
    last_response_code: int | None = None
    last_error: str | None = None
    last_duration_ms: float | None = None


class DeliveryList(Model):
    deliveries: list[Delivery] = Field(default_factory=list)
    next_cursor: str | None = None


class WebhookEvent(Model):
    """What a receiver gets: `{"id", "event", "created_at", "data"}` (data: a Job, or the
    deleted document's fields)."""

    id: str
    event: str
    created_at: str
    data: dict[str, Any] = Field(default_factory=dict)
