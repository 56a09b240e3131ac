"""The FastAPI app factory. Clients are built in the lifespan, never at import time.

`docingest serve` passes the `Services` it shares with its in-process worker (one embedded
store per process); `docingest api` lets the lifespan build its own.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from celery import Celery
from fastapi import FastAPI

from docingest.api.auth import KeyRing
from docingest.api.deps import AppState
from docingest.api.errors import install_error_handlers
from docingest.api.metrics import registry_for
from docingest.api.routes import (
    docs,
    documents,
    indexes,
    jobs,
    ops,
    search,
    sources,
    web,
    webhooks,
)
from docingest.pipeline.services import Services
from docingest.pipeline.settings import Settings, get_settings
from docingest.workers.app import create_celery_app

log = logging.getLogger(__name__)

API_VERSION = "1.0.0"


def create_app(
    settings: Settings | None = None,
    *,
    services: Services | None = None,
    celery: Celery | None = None,
    owns_store: bool = True,
) -> FastAPI:
    """Build the app; `owns_store=False` beside a separate worker owning the embedded store."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        resolved = services.settings if services else (settings or get_settings())
        own_services = services is None
        active = services or Services(resolved, owns_store=owns_store)
        app.state.docingest = AppState(
            services=active,
            celery=celery or create_celery_app(resolved),
            keyring=KeyRing(list(resolved.api_keys)),
        )
        app.state.metrics_registry = registry_for(active)
        app.state.ready_cache = {}
        resolved.staging_dir.mkdir(parents=True, exist_ok=True)
        try:
            yield
        finally:
            if own_services:
                active.close()

    app = FastAPI(
        title="docingest",
        version=API_VERSION,
        summary="Turn documents into searchable chunks: upload, poll, search.",
        lifespan=lifespan,
        openapi_url=None,  # served by docingest/api/routes/docs.py, behind the API keys
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    for module in (indexes, documents, jobs, search, webhooks, sources, ops, docs, web):
        app.include_router(module.router)
    return app
