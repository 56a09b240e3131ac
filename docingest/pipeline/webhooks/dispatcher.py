"""The dispatcher: claims due deliveries from the outbox with a lease, sends each on one of a
fixed set of sender threads, and records the outcome: delivered, retried later (exponential
backoff with jitter) or, once the retry period is over, failed.

One runs in every `docingest serve` and `docingest worker` process; any number may share a
Redis. A claim moves the delivery's due time past its lease (`LEASE_SECONDS`), so if the
process dies mid-attempt (kill -9), another dispatcher, or this one restarted, claims it
again when the lease runs out: delivery is at least once, and a receiver dedupes on
`X-Docingest-Delivery`. It runs on its own threads and HTTP client, never on the ingest path.
A receiver that is slow or never answers holds only its own senders: at most
`webhook_target_concurrency`, and the slow ones together at most half of them
(`docingest.pipeline.webhooks.targets`), so the others' deliveries go out meanwhile.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time

from docingest.pipeline import metrics
from docingest.pipeline.errors import DependencyUnavailable
from docingest.pipeline.outbox import Delivery, Outbox
from docingest.pipeline.settings import Settings
from docingest.pipeline.webhooks.connections import Connections
from docingest.pipeline.webhooks.payload import render
from docingest.pipeline.webhooks.sender import Attempt, attempt, headers_for
from docingest.pipeline.webhooks.targets import TargetLoad

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
"""How often an idle dispatcher looks for due deliveries (one cheap Redis call)."""
REDIS_DOWN_PAUSE_SECONDS = 2.0


def lease_seconds(settings: Settings) -> float:
    """How long a claim lasts: above an attempt's longest (the timeout, and resolving the
    name), so a live dispatcher's delivery is never claimed twice."""
    return 2 * settings.webhook_timeout_seconds + 10


def backoff(settings: Settings, attempt_number: int) -> float:
    """Seconds before the next attempt after `attempt_number` failed: doubling from the base
    up to the cap, times a random 0.5-1 (jitter, so receivers coming back are not hit by
    every delivery at once)."""
    exponent = min(attempt_number - 1, 40)
    delay = min(settings.webhook_backoff_base_seconds * 2**exponent,
                settings.webhook_backoff_max_seconds)  # fmt: skip
    return delay * random.uniform(0.5, 1.0)


class Dispatcher:
    """Start with `start()`, stop with `stop()`; `run_once()` is one claim round."""

    def __init__(self, outbox: Outbox, settings: Settings) -> None:
        self._outbox = outbox
        self._settings = settings
        self._slots = threading.BoundedSemaphore(settings.webhook_concurrency)
        """One per sender thread not busy with a delivery."""
        self._claimed: queue.SimpleQueue[tuple[Delivery, float] | None] = queue.SimpleQueue()
        """Each claimed delivery with when it was counted in flight (`TargetLoad.started`)."""
        self._connections = Connections(most=settings.webhook_concurrency)
        self._load = TargetLoad(
            per_target=settings.webhook_target_concurrency,
            slow_share=max(1, settings.webhook_concurrency // 2),
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="webhooks", daemon=True)
        # Threads kept for the process's life rather than one per delivery: a thread's start
        # was a tenth of a delivery's CPU (BENCHMARKS.md, "Webhooks").
        self._senders = [
            threading.Thread(target=self._send, name=f"webhook-send-{number}", daemon=True)
            for number in range(settings.webhook_concurrency)
        ]

    def start(self) -> None:
        for sender in self._senders:
            sender.start()
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop claiming; attempts under way are left to finish or to their lease."""
        self._stop.set()
        self._thread.join(timeout)
        for _ in self._senders:
            self._claimed.put(None)  # after what was claimed: each sender ends when it is done
        self._connections.close()

    def run_once(self) -> int:
        """Claim as many due deliveries as there are free senders and hand each to one; how
        many."""
        free = 0
        while self._slots.acquire(blocking=False):
            free += 1
        if free == 0:
            return 0
        try:
            claimed = self._outbox.claim(
                free, lease_seconds=lease_seconds(self._settings), room=self._load.room()
            )
        except BaseException:
            for _ in range(free):
                self._slots.release()
            raise
        for _ in range(free - len(claimed)):
            self._slots.release()
        for delivery in claimed:  # counted now, so the next claim sees it, not when sent
            self._claimed.put((delivery, self._load.started(delivery.target)))
        return len(claimed)

    def _run(self) -> None:
        while not self._stop.is_set():
            # Wait for a sender to come free rather than a whole poll, so a backlog goes out
            # as fast as the senders finish; the slot is taken again by `run_once`.
            if not self._slots.acquire(timeout=POLL_SECONDS):
                continue
            self._slots.release()
            try:
                claimed = self.run_once()
            except DependencyUnavailable as exc:
                log.warning("webhook dispatcher: %s", exc)
                self._stop.wait(REDIS_DOWN_PAUSE_SECONDS)
                continue
            except Exception:  # a bug must not end delivery for the process's lifetime
                log.exception("webhook dispatcher round failed")
                self._stop.wait(REDIS_DOWN_PAUSE_SECONDS)
                continue
            if claimed == 0:
                self._stop.wait(POLL_SECONDS)

    def _send(self) -> None:
        while (claimed := self._claimed.get()) is not None:
            self._deliver(*claimed)

    def _deliver(self, delivery: Delivery, start: float) -> None:
        try:
            self._attempt(delivery)
        except DependencyUnavailable as exc:  # the lease runs out and it is claimed again
            log.warning("webhook delivery %s: %s", delivery.id, exc)
        except Exception:
            log.exception("webhook delivery %s failed unexpectedly", delivery.id)
        finally:
            self._load.ended(delivery.target, start)
            self._slots.release()

    def _attempt(self, delivery: Delivery) -> None:
        settings = self._settings
        url, secret = delivery.url, delivery.secret
        if delivery.webhook:
            subscription = delivery.subscription
            if subscription is None:
                self._outbox.resolve(delivery, "dropped", error="the webhook was removed")
                return
            url, secret = subscription.url, subscription.secret
        body = delivery.fields.get("body") or self._outbox.keep_body(
            delivery.id, render(delivery.fields)
        )
        data = body.encode()
        headers = headers_for(
            event=delivery.event,
            delivery_id=delivery.id,
            body=data,
            secret=secret,
            attempt=delivery.attempt,
            now=time.time(),
        )
        result = attempt(
            url,
            data,
            headers,
            timeout=settings.webhook_timeout_seconds,
            allow_private=settings.webhook_allow_private,
            connections=self._connections,
        )
        metrics.WEBHOOK_SECONDS.observe(result.seconds)
        self._record(delivery, result)

    def _record(self, delivery: Delivery, result: Attempt) -> None:
        settings = self._settings
        duration_ms = result.seconds * 1000
        if result.delivered:
            self._outbox.resolve(delivery, "delivered", code=result.code, duration_ms=duration_ms)
            metrics.WEBHOOK_ATTEMPTS.labels("delivered").inc()
            metrics.WEBHOOK_DELIVERY_SECONDS.observe(max(0.0, time.time() - delivery.created_at))
            return
        age = time.time() - delivery.created_at
        if age >= settings.webhook_retry_hours * 3600:
            log.warning("webhook delivery %s to %s failed for good after %d attempts: %s",
                        delivery.id, delivery.webhook or "callback", delivery.attempt,
                        result.error)  # fmt: skip
            outcome, retry_in = "failed", 0.0
        else:
            outcome, retry_in = "retry", backoff(settings, delivery.attempt)
        self._outbox.resolve(
            delivery,
            outcome,
            retry_in=retry_in,
            code=result.code,
            error=result.error,
            duration_ms=duration_ms,
        )
        metrics.WEBHOOK_ATTEMPTS.labels(outcome).inc()
