"""`/healthz`, `/readyz` and `/metrics`."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from docingest.api.deps import CallerDep, StateDep
from docingest.api.metrics import render
from docingest.pipeline.embedders.base import EmbeddingConfig
from docingest.pipeline.errors import IngestError
from docingest.pipeline.services import Services
from docingest.pipeline.store.engine import store_description

router = APIRouter(tags=["operations"])

READY_CACHE_SECONDS = 10.0
"""A passing embedding check is reused this long, so probes do not spend provider calls."""


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """200 while the process runs; answered on the event loop, never queued behind the
    worker threads that searches and a slow re-ranker may fill."""
    return {"status": "ok"}


def _check_embedding(services: Services, request: Request) -> str | None:
    cache = request.app.state.ready_cache
    if time.monotonic() - cache.get("embedding_ok_at", -1e9) < READY_CACHE_SECONDS:
        return None
    try:
        config = EmbeddingConfig.from_settings(services.settings)
        services.embedder_for(config).embed_query("readiness check")
    except IngestError as exc:
        return exc.message
    except Exception as exc:  # a provider or model failure of any kind means not ready
        return f"{type(exc).__name__}: {exc}"
    cache["embedding_ok_at"] = time.monotonic()
    return None


def _readiness(services: Services, request: Request) -> dict[str, str]:
    checks: dict[str, str] = {}
    redis_problem = services.redis_ok()
    checks["redis"] = "ok" if redis_problem is None else f"unavailable: {redis_problem}"
    # the store's check is named after its family ("qdrant" as in v1, or "postgres")
    store = "postgres" if services.settings.database_url is not None else "qdrant"
    if services.owns_store:
        try:
            services.store.ping()
            checks[store] = "ok"
        except IngestError as exc:
            checks[store] = f"unavailable: {exc.message}"
    else:
        checks[store] = "ok: embedded store, owned by the worker process"
    problem = _check_embedding(services, request)
    checks["embedding"] = "ok" if problem is None else f"unavailable: {problem}"
    return checks


@router.get("/readyz")
async def readyz(request: Request, state: StateDep, caller: CallerDep) -> JSONResponse:
    """200 when Redis, the store and the embedding provider answer, else 503 naming which not;
    `store` says which store is in use and where."""
    checks = await run_in_threadpool(_readiness, state.services, request)
    ready = all(value.startswith("ok") for value in checks.values())
    body = {
        "status": "ready" if ready else "unavailable",
        "checks": checks,
        "store": store_description(state.services.settings),
    }
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics", response_class=Response)
async def metrics(request: Request, caller: CallerDep) -> Response:
    """Prometheus text format; with API keys, for a key not limited to some indexes.

    Not a filtered view for limited keys: beside the per-index usage, the jobs by status,
    queue depth, staging, embedding and webhook series count every index's work together,
    so even without names they would show a tenant the others' activity. Scraping is the
    operator's; a limited key reads its indexes' usage from `GET /v1/indexes/{index}`."""
    caller.check_every_index("/metrics")
    payload = await run_in_threadpool(render, request.app.state.metrics_registry)
    return Response(payload, media_type="text/plain; version=0.0.4; charset=utf-8")
