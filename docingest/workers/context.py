"""The `Services` of this worker process: given by `docingest serve`, else built on first use.

Clients are never created at import time or before a fork: a prefork child builds its own on
its first task, and `worker_process_init` drops anything a child inherited.
"""

from __future__ import annotations

import threading

from docingest.pipeline.services import Services
from docingest.pipeline.settings import Settings, get_settings

_lock = threading.Lock()
_services: Services | None = None
_owns_store = True


def install(services: Services) -> None:
    """Make `services` this process's (the embedded server shares the API's)."""
    global _services
    with _lock:
        _services = services


def configure(*, owns_store: bool) -> None:
    """Say whether services built later in this process may open the embedded store."""
    global _owns_store
    _owns_store = owns_store


def current(settings: Settings | None = None) -> Services:
    """Return this process's services, building them on first use."""
    global _services
    with _lock:
        if _services is None:
            _services = Services(settings or get_settings(), owns_store=_owns_store)
        return _services


def forget() -> None:
    """Drop inherited services without closing them (they belong to the parent process)."""
    global _services
    with _lock:
        _services = None


def shutdown() -> None:
    """Close this process's services (releases the embedded store's lock)."""
    global _services
    with _lock:
        if _services is not None:
            _services.close()
            _services = None
