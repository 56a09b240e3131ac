"""Sends the housekeeping task every interval, from any number of workers, without a beat.

Each worker runs a `HousekeepingTicker`; on every tick it tries `SET key NX PX interval` and
only the winner sends the sweep, so one sweep runs per interval however many workers there
are, and the sweep goes on as long as any worker is alive (no single beat process to lose).
"""

from __future__ import annotations

import logging
import threading

from celery import Celery
from redis.exceptions import RedisError

from docingest.pipeline.keys import HOUSEKEEPING_QUEUE, HOUSEKEEPING_TASK
from docingest.pipeline.services import Services

log = logging.getLogger(__name__)


class HousekeepingTicker:
    def __init__(self, app: Celery, services: Services) -> None:
        self._app = app
        self._services = services
        self._interval = services.settings.housekeeping_interval_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="housekeeping", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def tick(self) -> bool:
        """Send one sweep unless another worker did within the interval; True if sent."""
        key = self._services.keys.housekeeping_tick
        won = self._services.redis.set(key, "1", nx=True, px=int(self._interval * 1000))
        if won:
            # A sweep still queued when the next one is due is dropped, not run late in a pile.
            self._app.send_task(
                HOUSEKEEPING_TASK, queue=HOUSEKEEPING_QUEUE, expires=2 * self._interval
            )
        return bool(won)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.tick()
            except (RedisError, OSError) as exc:  # the broker or Redis blipped; next tick
                log.warning("housekeeping tick failed: %s", exc)
