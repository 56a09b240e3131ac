"""The webhook outbox in Redis: subscriptions, deliveries in order per document, their log.

Deliveries are written by the same Lua scripts that change the state they report (a job's
completion, failure or cancellation: `pipeline.jobs.scripts`), so a change is never recorded
without its events, nor an event without its change. `pipeline.webhooks` sends them.
"""

from pipeline.outbox.events import EVENTS, JOB_EVENTS, Event
from pipeline.outbox.store import Delivery, Outbox, Subscription, outbox_arg

__all__ = ["EVENTS", "JOB_EVENTS", "Delivery", "Event", "Outbox", "Subscription", "outbox_arg"]
