"""v1.2 webhooks: subscriptions, their deliveries, and the event a receiver gets."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from docingest.models._base import Body, Model

WebhookEventName = Literal["job.completed", "job.failed", "job.cancelled", "document.deleted"]


class WebhookSubscription(Body):
    """The body of `PUT /v1/indexes/{index}/webhooks/{name}`."""

    url: str
    events: list[WebhookEventName] | None = None
    secret: str | None = None


class Webhook(Model):
    """A subscription as listed (never with its secret)."""

    name: str | None = None
    index: str | None = None
    url: str
    events: list[str] = Field(default_factory=list)
    created_at: str | None = None


class WebhookList(Model):
    webhooks: list[Webhook] = Field(default_factory=list)


class Delivery(Model):
    """One delivery attempt's record, as the deliveries log shows it."""

    id: str
    event: str | None = None
    status: str | None = None
    attempts: int | None = None
    created_at: str | None = None
    delivered_at: str | None = None
    next_attempt_at: str | None = None
    response_status: int | None = None
    error: str | None = None


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
