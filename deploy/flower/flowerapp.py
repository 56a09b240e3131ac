"""The Celery app Flower inspects (`celery --app flowerapp flower`): no tasks, only docingest's
broker, its Redis key prefix and visibility timeout, read from the same DOCINGEST_* variables as
the workers, so Flower sees the workers' queues and control messages."""

from __future__ import annotations

import os

from celery import Celery

_prefix = os.environ.get("DOCINGEST_REDIS_KEY_PREFIX", "docingest:")
_visibility = int(os.environ.get("DOCINGEST_BROKER_VISIBILITY_TIMEOUT_SECONDS", "7200"))

app = Celery("docingest", broker=os.environ.get("DOCINGEST_REDIS_URL", "redis://redis:6379/0"))
app.conf.broker_transport_options = {
    "global_keyprefix": f"{_prefix}celery:",
    "visibility_timeout": _visibility,
}
