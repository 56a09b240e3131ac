"""`Outbox`: an index's webhook subscriptions, the document.deleted event, and the
dispatcher's side of the deliveries (claim with a lease, resolve, log, counts).

Deliveries are written by the same Lua scripts that change the state they report (a job's
completion, failure or cancellation: `docingest.pipeline.jobs.scripts`), so a change is never
recorded without its events, nor an event without its change. `docingest.pipeline.webhooks` sends
them.

A subscription's secret is kept in Redis in clear, since signing needs it; it is never
shown again after the PUT that set it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from docingest.pipeline.keys import Keys
from docingest.pipeline.outbox.scripts import CLAIM_DUE, EMIT_DELETED, RESOLVE
from docingest.pipeline.redis_errors import map_redis_errors

if TYPE_CHECKING:
    from redis import Redis

STAT_FIELDS = ("pending", "delivered", "retried", "failed", "dropped")
"""The outbox's counters: pending now; delivered, retried (failed attempts that will be
tried again), failed (given up after the retry period) and dropped (their webhook was removed)
since Redis began."""


def outbox_arg(keys: Keys, *, log_size: int) -> str:
    """The JSON a job script takes as its last argument to write deliveries (`EMIT`), with a
    fresh id base, so each delivery id is unique and unguessable."""
    return json.dumps(
        {
            "subs": keys.webhooks_prefix,
            "due": keys.webhooks_due,
            "delivery": keys.webhook_delivery_prefix,
            "chain": keys.webhook_chain_prefix,
            "log": keys.webhook_log_prefix,
            "stats": keys.webhook_stats,
            "log_size": log_size,
            "id": "dlv_" + uuid.uuid4().hex,
        },
        separators=(",", ":"),
    )


def rfc3339(value: str | float | None) -> str | None:
    if value is None or value == "":
        return None
    moment = datetime.fromtimestamp(float(value), tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Subscription(BaseModel):
    """A webhook as stored: what it receives and where."""

    model_config = ConfigDict(frozen=True)

    name: str
    index: str
    url: str
    events: list[str]
    secret: str
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class ClaimRoom:
    """What one claim may take per target (a receiver's origin): `rooms` for the busy targets
    (any other gets `per_target`), and `slow_room` shared by the `slow` targets
    (`docingest.pipeline.webhooks.targets`)."""

    per_target: int
    rooms: dict[str, int]
    slow: list[str]
    slow_room: int


SCAN_BEYOND = 200
"""Due deliveries a claim looks at beyond those it may take, to find ones whose target has room;
those it passes over are put off (`PUT_OFF_SECONDS`), so a longer backlog moves too."""
PUT_OFF_SECONDS = (0.25, 1.0)
"""How long a delivery is put off when its target is busy, or slow: briefly for a busy one,
which frees a sender soon; longer for a slow one, whose attempts run to the timeout, yet short
enough that a healthy receiver briefly taken for slow is not held back (BENCHMARKS.md,
"Bulkheads")."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """One claimed delivery, as the dispatcher sends it."""

    id: str
    event: str
    index: str
    document_id: str
    webhook: str
    """The subscription's name; empty for a per-upload callback."""
    url: str
    """The callback's URL (a subscription's is read when sending, so a fixed URL helps)."""
    secret: str
    attempt: int
    created_at: float
    fields: Mapping[str, str]
    """The whole stored hash (`job` or `data`, `body` once rendered)."""
    subscription: Subscription | None = None
    """The webhook as it is now (None for a callback, or when the webhook was removed)."""
    target: str = ""
    """The receiver's origin (`scheme://host:port`), which its limits are kept by."""


class Outbox:
    """One per process; `redis` must decode responses."""

    def __init__(self, redis: Redis, *, keys: Keys, log_size: int, keep_seconds: int) -> None:
        self._redis = redis
        self.keys = keys
        self.log_size = log_size
        self.keep_seconds = keep_seconds
        self._emit_deleted = redis.register_script(EMIT_DELETED)
        self._claim = redis.register_script(CLAIM_DUE)
        self._resolve = redis.register_script(RESOLVE)

    def arg(self) -> str:
        return outbox_arg(self.keys, log_size=self.log_size)

    # --- subscriptions ------------------------------------------------------------------

    def put(self, subscription: Subscription) -> tuple[Subscription, bool]:
        """Store `subscription`; (what is stored, whether it is new). An existing one keeps
        its `created_at` (and its secret when `subscription.secret` is empty)."""
        key = self.keys.webhooks(subscription.index)
        with map_redis_errors():
            old_raw = self._redis.hget(key, subscription.name)
            old = Subscription.model_validate_json(old_raw) if old_raw else None
            if old is not None:
                subscription = subscription.model_copy(
                    update={
                        "created_at": old.created_at,
                        "secret": subscription.secret or old.secret,
                    }
                )
                if _alike(old, subscription):
                    subscription = old
            self._redis.hset(key, subscription.name, subscription.model_dump_json())
        return subscription, old is None

    def get(self, index: str, name: str) -> Subscription | None:
        with map_redis_errors():
            raw = self._redis.hget(self.keys.webhooks(index), name)
        return Subscription.model_validate_json(raw) if raw else None

    def subscriptions(self, index: str) -> list[Subscription]:
        with map_redis_errors():
            raw = self._redis.hgetall(self.keys.webhooks(index))
        found = [Subscription.model_validate_json(value) for value in raw.values()]
        return sorted(found, key=lambda sub: sub.name)

    def count(self, index: str) -> int:
        with map_redis_errors():
            return int(self._redis.hlen(self.keys.webhooks(index)))

    def delete(self, index: str, name: str) -> bool:
        """Remove the webhook and its log; its pending deliveries are dropped when next due."""
        with map_redis_errors(), self._redis.pipeline(transaction=True) as pipe:
            pipe.hdel(self.keys.webhooks(index), name)
            pipe.delete(self.keys.webhook_log(index, name))
            removed, _ = pipe.execute()
        return bool(removed)

    # --- events not tied to a job -------------------------------------------------------

    def begin_delete(self, index: str, document_id: str, *, version: int) -> None:
        """Record that the document is being deleted, before the store is touched, with the
        version that supersedes its stored ones: if the process dies before `emit_deleted`,
        the sweep finds the record and finishes the delete's event
        (`docingest.pipeline.ingest.sweep`)."""
        record = json.dumps({"version": version, "at": time.time()})
        with map_redis_errors():
            self._redis.hset(self.keys.webhooks_deleting, _delete_field(index, document_id), record)

    def abandon_delete(self, index: str, document_id: str) -> None:
        """Forget a delete that removed nothing (so it has no event)."""
        with map_redis_errors():
            self._redis.hdel(self.keys.webhooks_deleting, _delete_field(index, document_id))

    def deletes_under_way(self) -> list[DeleteUnderWay]:
        """The deletes begun and not ended: under way, or their process died."""
        with map_redis_errors():
            raw = self._redis.hgetall(self.keys.webhooks_deleting)
        found = []
        for field, value in raw.items():
            index, document_id = json.loads(field)
            record = json.loads(value)
            found.append(DeleteUnderWay(index, document_id, int(record["version"]), record["at"]))
        return found

    def delete_under_way(self, index: str, document_id: str) -> DeleteUnderWay | None:
        with map_redis_errors():
            value = self._redis.hget(self.keys.webhooks_deleting, _delete_field(index, document_id))
        if value is None:
            return None
        record = json.loads(value)
        return DeleteUnderWay(index, document_id, int(record["version"]), record["at"])

    def emit_deleted(self, index: str, document_id: str, deleted_at: float) -> int:
        """Enqueue `document.deleted` for the index's subscribers and end the delete begun
        with `begin_delete`, in one step; how many deliveries."""
        data = {"index": index, "document_id": document_id, "deleted_at": rfc3339(deleted_at)}
        args = [
            index,
            document_id,
            json.dumps(data, separators=(",", ":")),
            _delete_field(index, document_id),
            self.arg(),
        ]
        with map_redis_errors():
            return int(self._emit_deleted(keys=[self.keys.webhooks_deleting], args=args))

    # --- the dispatcher's side ----------------------------------------------------------

    def claim(
        self, most: int, *, lease_seconds: float, room: ClaimRoom | None = None
    ) -> list[Delivery]:
        """Claim up to `most` due deliveries for `lease_seconds`, within `room` when given
        (else as many to one target as to any)."""
        if room is None:
            room = ClaimRoom(per_target=most, rooms={}, slow=[], slow_room=most)
            scan = most
        else:
            scan = most + SCAN_BEYOND
        with map_redis_errors():
            rows = self._claim(
                keys=[self.keys.webhooks_due],
                args=[
                    self.keys.webhook_delivery_prefix,
                    most,
                    lease_seconds,
                    self.keys.webhooks_prefix,
                    scan,
                    room.per_target,
                    json.dumps(room.rooms),
                    json.dumps(room.slow),
                    room.slow_room,
                    *PUT_OFF_SECONDS,
                ],
            )
        claimed = []
        for row in rows:
            fields = dict(zip(row[::2], row[1::2], strict=True))
            claimed.append(
                Delivery(
                    id=fields["id"],
                    event=fields["event"],
                    index=fields["index"],
                    document_id=fields["document_id"],
                    webhook=fields.get("webhook", ""),
                    url=fields.get("url", ""),
                    secret=fields.get("secret", ""),
                    attempt=int(fields["attempts"]),
                    created_at=float(fields["created_at"]),
                    fields=fields,
                    subscription=(
                        Subscription.model_validate_json(fields["subscription"])
                        if fields.get("subscription")
                        else None
                    ),
                    target=fields.get("target", ""),
                )
            )
        return claimed

    def keep_body(self, delivery_id: str, body: str) -> str:
        """Store the delivery's body once, so every attempt sends the same bytes; the body
        stored (this one, or one an earlier attempt stored)."""
        key = self.keys.webhook_delivery(delivery_id)
        with map_redis_errors():
            if self._redis.hsetnx(key, "body", body):
                return body
            stored = self._redis.hget(key, "body")
        return str(stored) if stored is not None else body

    def resolve(
        self,
        delivery: Delivery,
        outcome: str,
        *,
        retry_in: float = 0.0,
        code: int | None = None,
        error: str | None = None,
        duration_ms: float = 0.0,
    ) -> bool:
        """Record an attempt's outcome: `delivered`, `retry` (in `retry_in` s), `failed` or
        `dropped`; an end makes the document's next delivery to the target due."""
        args: list[str | int | float] = [
            self.keys.webhook_delivery_prefix,
            delivery.id,
            delivery.attempt,
            outcome,
            retry_in,
            "" if code is None else code,
            (error or "")[:500],
            self.keep_seconds,
            round(duration_ms, 1),
        ]
        with map_redis_errors():
            return bool(
                self._resolve(keys=[self.keys.webhooks_due, self.keys.webhook_stats], args=args)
            )

    # --- what operators see -------------------------------------------------------------

    def recent(self, index: str, name: str, limit: int) -> list[dict[str, str]]:
        """The webhook's most recent deliveries that still exist, newest first."""
        with map_redis_errors():
            ids = self._redis.lrange(self.keys.webhook_log(index, name), 0, limit - 1)
            with self._redis.pipeline(transaction=False) as pipe:
                for delivery_id in ids:
                    pipe.hgetall(self.keys.webhook_delivery(str(delivery_id)))
                rows: list[dict[str, str]] = pipe.execute()
        return [row for row in rows if row]

    def stats(self) -> dict[str, int]:
        """The counters of `STAT_FIELDS`, and `due`: deliveries due now or leased."""
        with map_redis_errors():
            with self._redis.pipeline(transaction=False) as pipe:
                pipe.hgetall(self.keys.webhook_stats)
                pipe.zcard(self.keys.webhooks_due)
                raw, due = pipe.execute()
        counts = {field: int(raw.get(field, 0)) for field in STAT_FIELDS}
        counts["due"] = int(due)
        return counts


@dataclass(frozen=True, slots=True)
class DeleteUnderWay:
    """A document delete begun and not yet ended with its event (`Outbox.begin_delete`)."""

    index: str
    document_id: str
    version: int
    """The version the delete handed out: every stored one is older, a later upload's newer."""
    at: float
    """When it began (Unix seconds)."""


def _delete_field(index: str, document_id: str) -> str:
    return json.dumps([index, document_id], ensure_ascii=False, separators=(",", ":"))


def _alike(old: Subscription, new: Subscription) -> bool:
    return (old.url, sorted(old.events), old.secret) == (new.url, sorted(new.events), new.secret)


def delivery_summary(raw: Mapping[str, str]) -> dict[str, Any]:
    """A stored delivery as the deliveries endpoint shows it."""
    job = json.loads(raw["job"]) if raw.get("job") else None
    code = raw.get("last_code")
    duration = raw.get("last_duration_ms")
    return {
        "id": raw["id"],
        "event": raw["event"],
        "document_id": raw.get("document_id"),
        "job_id": job.get("job_id") if isinstance(job, dict) else None,
        "status": raw.get("status"),
        "attempts": int(raw.get("attempts") or 0),
        "created_at": rfc3339(raw.get("created_at")),
        "last_attempt_at": rfc3339(raw.get("last_attempt_at")),
        "next_attempt_at": rfc3339(raw.get("next_at")),
        "finished_at": rfc3339(raw.get("finished_at")),
        "last_response_code": int(code) if code else None,
        "last_error": raw.get("last_error") or None,
        "last_duration_ms": float(duration) if duration else None,
    }
