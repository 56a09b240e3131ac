"""What the PostgreSQL store's connection pool (psycopg_pool) may log.

While the server is down, the pool tries to connect again and again in its own threads,
with a growing pause, and logs a warning with the server's message at every try: 15
warnings of three lines each in 40 s of a server stopped, beside the engine's own errors.
The engine already says the same once per call that met it, as `dependency_unavailable`
with the server's first line (which `/readyz`, a waiting job's log line and the caller's
error carry), so those repeats are dropped. The pool's other warnings stay: that it gave up
reconnecting, or that a connection came back broken or inside a transaction (a bug of ours).
"""

from __future__ import annotations

import logging

POOL_LOGGER = "psycopg.pool"
RECONNECT_MESSAGE = "error connecting in "
"""How psycopg_pool's warning for one failed connection attempt begins (its `msg`)."""


class RepeatedReconnects(logging.Filter):
    """Drop the pool's warning for each failed connection attempt (see the module)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(RECONNECT_MESSAGE))


_FILTER = RepeatedReconnects()


def quiet_reconnects() -> None:
    """Install the filter on the pool's logger (once, however often called)."""
    logging.getLogger(POOL_LOGGER).addFilter(_FILTER)
