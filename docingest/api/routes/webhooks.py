"""`/v1/indexes/{index}/webhooks`: subscribe (PUT), list, remove, and the delivery log.

The URL is checked as each delivery will be (`docingest.pipeline.webhooks.urls`): http(s), a host
that resolves, and only to public addresses unless `webhook_allow_private`. A webhook does not
need its index to exist yet (an upload creates it), so it may be set up first.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from docingest.api.deps import AuthorizedIndex, ServicesDep, require_admin
from docingest.pipeline.errors import InvalidWebhook, WebhookNotFound
from docingest.pipeline.outbox import EVENTS, Subscription
from docingest.pipeline.outbox.store import delivery_summary, rfc3339
from docingest.pipeline.webhooks.urls import (
    MAX_SECRET_CHARS,
    MAX_URL_CHARS,
    MIN_SECRET_CHARS,
    check_url,
)

router = APIRouter(
    prefix="/v1/indexes/{index}/webhooks",
    tags=["webhooks"],
    dependencies=[Depends(require_admin)],  # deliveries tell of every document of the index
)

MAX_WEBHOOKS_PER_INDEX = 32
"""Subscriptions one index may have: each event is written once per subscriber inside the
job's own Redis script, so their number bounds that script's work."""
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SECRET_CHARS = (MIN_SECRET_CHARS, MAX_SECRET_CHARS)

WebhookName = Annotated[str, Path(description="1-64 letters, digits, `_`, `.` or `-`.")]


class WebhookBody(BaseModel):
    """A webhook: where to POST which events; `secret` signs them (generated if omitted)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(max_length=MAX_URL_CHARS)
    events: list[str] = Field(min_length=1, max_length=len(EVENTS) * 4)
    secret: str | None = Field(default=None, max_length=SECRET_CHARS[1])


class Webhook(BaseModel):
    """A webhook as listed: never its secret."""

    name: str
    index: str
    url: str
    events: list[str]
    created_at: str
    updated_at: str


class WebhookSaved(Webhook):
    secret: str | None = None
    """The secret the server generated, shown this once; None when the request gave one."""


class WebhookList(BaseModel):
    webhooks: list[Webhook]


class Delivery(BaseModel):
    id: str
    event: str
    document_id: str | None
    job_id: str | None
    status: str
    """pending | delivered | failed (given up after the retry period) | dropped (the webhook
    was removed before it was delivered)."""
    attempts: int
    created_at: str | None
    last_attempt_at: str | None
    next_attempt_at: str | None
    finished_at: str | None
    last_response_code: int | None
    last_error: str | None
    last_duration_ms: float | None


class DeliveryList(BaseModel):
    deliveries: list[Delivery]


def _public(subscription: Subscription) -> dict[str, Any]:
    return {
        "name": subscription.name,
        "index": subscription.index,
        "url": subscription.url,
        "events": subscription.events,
        "created_at": rfc3339(subscription.created_at),
        "updated_at": rfc3339(subscription.updated_at),
    }


def _check_name(name: str) -> None:
    if not NAME.match(name):
        raise InvalidWebhook(
            "A webhook name is 1-64 letters, digits, '_', '.' or '-', starting with a letter "
            "or digit."
        )


def _check_events(events: list[str]) -> list[str]:
    unknown = sorted({event for event in events if event not in EVENTS})
    if unknown:
        raise InvalidWebhook(
            f"Unknown webhook events {unknown[:5]}; the events are {sorted(EVENTS)}."
        )
    return sorted(set(events))


@router.put("/{name}", response_model=WebhookSaved, status_code=201)
async def put_webhook(
    index: AuthorizedIndex,
    name: WebhookName,
    body: WebhookBody,
    services: ServicesDep,
    response: Response,
) -> WebhookSaved:
    """Create the webhook (201) or replace its URL, events or secret (200; an omitted secret
    keeps the one it has)."""
    _check_name(name)
    events = _check_events(body.events)
    if body.secret is not None and len(body.secret) < SECRET_CHARS[0]:
        raise InvalidWebhook(f"A webhook secret must be at least {SECRET_CHARS[0]} characters.")
    settings = services.settings
    await run_in_threadpool(check_url, body.url, allow_private=settings.webhook_allow_private)
    outbox = services.outbox
    existing = await run_in_threadpool(outbox.get, index, name)
    if existing is None and await run_in_threadpool(outbox.count, index) >= MAX_WEBHOOKS_PER_INDEX:
        raise InvalidWebhook(
            f"Index '{index}' has {MAX_WEBHOOKS_PER_INDEX} webhooks, the most it may have."
        )
    generated = None
    if body.secret is None and existing is None:
        generated = "whsec_" + secrets.token_urlsafe(32)
    now = time.time()
    subscription = Subscription(
        name=name,
        index=index,
        url=body.url,
        events=events,
        secret=body.secret or generated or "",
        created_at=now,
        updated_at=now,
    )
    saved, created = await run_in_threadpool(outbox.put, subscription)
    response.status_code = 201 if created else 200
    return WebhookSaved(**_public(saved), secret=generated)


@router.get("", response_model=WebhookList)
def list_webhooks(index: AuthorizedIndex, services: ServicesDep) -> WebhookList:
    subscriptions = services.outbox.subscriptions(index)
    return WebhookList(webhooks=[Webhook(**_public(sub)) for sub in subscriptions])


@router.get("/{name}", response_model=Webhook)
def get_webhook(index: AuthorizedIndex, name: WebhookName, services: ServicesDep) -> Webhook:
    subscription = services.outbox.get(index, name)
    if subscription is None:
        raise WebhookNotFound(f"Index '{index}' has no webhook '{name}'.")
    return Webhook(**_public(subscription))


@router.delete("/{name}", status_code=204)
def delete_webhook(index: AuthorizedIndex, name: WebhookName, services: ServicesDep) -> Response:
    """Remove the webhook; its deliveries not yet made are dropped."""
    if not services.outbox.delete(index, name):
        raise WebhookNotFound(f"Index '{index}' has no webhook '{name}'.")
    return Response(status_code=204)


@router.get("/{name}/deliveries", response_model=DeliveryList)
def list_deliveries(
    index: AuthorizedIndex,
    name: WebhookName,
    services: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> DeliveryList:
    """The webhook's most recent deliveries, newest first (up to `webhook_log_size`)."""
    if services.outbox.get(index, name) is None:
        raise WebhookNotFound(f"Index '{index}' has no webhook '{name}'.")
    rows = services.outbox.recent(index, name, limit)
    return DeliveryList(deliveries=[Delivery(**delivery_summary(row)) for row in rows])
