"""The webhook outbox in Redis: subscriptions, deliveries in order per document, their log."""

from docingest.pipeline.outbox.events import EVENTS, JOB_EVENTS, Event
from docingest.pipeline.outbox.store import (
    ClaimRoom,
    DeleteUnderWay,
    Delivery,
    Outbox,
    Subscription,
    outbox_arg,
)

__all__ = [
    "EVENTS",
    "JOB_EVENTS",
    "ClaimRoom",
    "DeleteUnderWay",
    "Delivery",
    "Event",
    "Outbox",
    "Subscription",
    "outbox_arg",
]
