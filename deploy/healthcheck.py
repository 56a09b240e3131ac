"""Container health check: exit 0 when this container's docingest process answers over HTTP.

    healthcheck.py api      GET /healthz on DOCINGEST_PORT (the image's HEALTHCHECK)
    healthcheck.py worker   GET /metrics on DOCINGEST_METRICS_PORT

A worker's metrics are served by its main Celery process, so an answer means that process
runs and is not wedged; unlike `celery inspect ping` it costs no broker round trip to every
worker. Stuck or lost jobs are the heartbeat sweep's business, not the health check's.
Standard library only, so it runs in a second without importing docingest.
"""

from __future__ import annotations

import os
import sys
import urllib.request

TIMEOUT_SECONDS = 4.0


def target(role: str) -> str:
    """The URL that must answer 200 for `role` ("api" or "worker")."""
    if role == "api":
        return f"http://127.0.0.1:{os.environ.get('DOCINGEST_PORT', '8000')}/healthz"
    if role == "worker":
        port = os.environ.get("DOCINGEST_METRICS_PORT")
        if not port:
            raise ValueError("DOCINGEST_METRICS_PORT is not set, so the worker serves nothing")
        return f"http://127.0.0.1:{port}/metrics"
    raise ValueError(f"unknown role {role!r}; use 'api' or 'worker'")


def main(argv: list[str]) -> int:
    try:
        url = target(argv[1] if len(argv) > 1 else "api")
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:
            if response.status == 200:
                return 0
            sys.stderr.write(f"{url} answered {response.status}\n")
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"unhealthy: {exc}\n")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
