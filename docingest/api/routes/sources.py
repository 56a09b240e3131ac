"""`/v1/indexes/{index}/sources`: keep an index in sync with a bucket, a website or a server
folder (PUT, list, show, DELETE), run one now (`/sync`), its runs, and cancel one.

A source's config is validated by its type's model and checked by its type (addresses, the
allowed folder roots) when saved; its secrets are write-only: every answer shows them as
"***", and a PUT that sends "***" back keeps the stored one.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from docingest.api.deps import AuthorizedIndex, ServicesDep, require_admin
from docingest.api.errors import error_body
from docingest.pipeline.errors import DocumentNotFound, InvalidSource, SourceNotFound
from docingest.pipeline.metadata import validate_user_metadata
from docingest.pipeline.outbox.store import rfc3339
from docingest.pipeline.services import Services
from docingest.pipeline.sources import (
    Run,
    Schedule,
    StoredSource,
    check_name,
    public_config,
    source_store,
    source_type,
)
from docingest.pipeline.sources.spec import SECRET_MASK
from docingest.pipeline.store.access import validate_access

router = APIRouter(
    prefix="/v1/indexes/{index}/sources",
    tags=["sources"],
    # A source fetches from where its config points and stamps its documents' access lists.
    dependencies=[Depends(require_admin)],
)

MAX_SOURCES_PER_INDEX = 64
SourceName = Annotated[str, Path(description="1-64 letters, digits, `_`, `.` or `-`.")]
RunId = Annotated[str, Path(max_length=128, description="A run's `run_id`.")]


class SourceBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = Field(max_length=64, description="A registered source type: s3, web, folder.")
    config: dict[str, Any] = Field(default_factory=dict)
    schedule: Schedule | None = None
    prune: bool = True
    metadata: dict[str, Any] = Field(default_factory=dict)
    access: list[str] | None = None
    """The access list stamped on every document the source brings (None: none, and each
    document keeps the list it has)."""


class Source(BaseModel):
    name: str
    index: str
    type: str
    config: dict[str, Any]
    schedule: Schedule | None
    prune: bool
    metadata: dict[str, Any]
    access: list[str] | None
    state: Literal["idle", "running"]
    last_run: Run | None
    next_run_at: str | None
    created_at: str | None
    updated_at: str | None


class SourceList(BaseModel):
    sources: list[Source]


class RunList(BaseModel):
    runs: list[Run]


def _view(services: Services, source: StoredSource) -> Source:
    store = source_store(services)
    runs = store.runs(source.index, source.name, 1)
    current = store.current(source.index, source.name)
    secrets = source_type(source.type).secrets
    return Source(
        name=source.name,
        index=source.index,
        type=source.type,
        config=public_config(source.config, secrets),
        schedule=source.schedule,
        prune=source.prune,
        metadata=source.metadata,
        access=source.access,
        state="running" if current is not None else "idle",
        last_run=runs[0] if runs else None,
        next_run_at=rfc3339(store.next_due(source.index, source.name)),
        created_at=rfc3339(source.created_at),
        updated_at=rfc3339(source.updated_at),
    )


def _validated(
    services: Services, body: SourceBody, existing: StoredSource | None
) -> dict[str, Any]:
    """The body's config, checked by its type, with "***" secrets taken from `existing`."""
    kind = source_type(body.type)
    config = dict(body.config)
    for secret in kind.secrets:
        if config.get(secret) == SECRET_MASK:
            if existing is None or existing.type != body.type or secret not in existing.config:
                raise InvalidSource(f"config.{secret} is '***' but no secret is stored.")
            config[secret] = existing.config[secret]
    try:
        model = kind.config.model_validate(config)
    except ValidationError as exc:
        problems = [
            f"config.{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()[:5]
        ]
        raise InvalidSource("Invalid source config: " + "; ".join(problems) + ".") from None
    kind.check(model, services.settings)
    return model.model_dump(mode="json")


def _get(services: Services, index: str, name: str) -> StoredSource:
    source = source_store(services).get(index, name)
    if source is None:
        raise SourceNotFound(f"Index '{index}' has no source '{name}'.")
    return source


@router.put("/{name}", response_model=Source, status_code=201)
async def put_source(
    index: AuthorizedIndex,
    name: SourceName,
    body: SourceBody,
    services: ServicesDep,
    response: Response,
) -> Source:
    """Create the source (201) or change it (200; a change takes effect from the next run)."""
    check_name(name)
    store = source_store(services)
    existing = await run_in_threadpool(store.get, index, name)
    if existing is None and len(await run_in_threadpool(store.sources, index)) >= (
        MAX_SOURCES_PER_INDEX
    ):
        raise InvalidSource(f"Index '{index}' has {MAX_SOURCES_PER_INDEX} sources, the most.")
    config = await run_in_threadpool(_validated, services, body, existing)
    metadata = validate_user_metadata(body.metadata, max_bytes=services.settings.max_metadata_bytes)
    if "source" in metadata:
        raise InvalidSource("Metadata key 'source' is set by the source itself; rename it.")
    now = time.time()
    stored = StoredSource(
        name=name,
        index=index,
        type=body.type,
        config=config,
        schedule=body.schedule,
        prune=body.prune,
        metadata=metadata,
        access=validate_access(body.access),
        created_at=now,
        updated_at=now,
    )
    saved, created = await run_in_threadpool(store.put, stored)
    response.status_code = 201 if created else 200
    return await run_in_threadpool(_view, services, saved)


@router.get("", response_model=SourceList)
def list_sources(index: AuthorizedIndex, services: ServicesDep) -> SourceList:
    sources = source_store(services).sources(index)
    return SourceList(sources=[_view(services, source) for source in sources])


@router.get("/{name}", response_model=Source)
def get_source(index: AuthorizedIndex, name: SourceName, services: ServicesDep) -> Source:
    return _view(services, _get(services, index, name))


@router.delete("/{name}", status_code=204)
def delete_source(
    index: AuthorizedIndex,
    name: SourceName,
    services: ServicesDep,
    delete_documents: Annotated[bool, Query()] = False,
) -> Response:
    """Remove the source (a run under way stops at its next item); with `delete_documents`
    also the documents it brought."""
    store = source_store(services)
    _get(services, index, name)
    brought = store.item_ids(index, name) if delete_documents else []
    store.delete(index, name)
    for document_id in brought:
        try:
            services.delete_document(index, document_id)
        except DocumentNotFound:
            pass
    return Response(status_code=204)


@router.post(
    "/{name}/sync",
    status_code=202,
    response_model=Run,
    responses={409: {"description": "A run is under way (`sync_in_progress`, with `run`)"}},
)
def sync_source(
    index: AuthorizedIndex, name: SourceName, services: ServicesDep
) -> Run | JSONResponse:
    """Queue a run now; a scheduler (in `serve` or a worker) starts it within
    `source_poll_seconds`."""
    _get(services, index, name)
    queued, run = source_store(services).request_run(index, name, trigger="manual")
    if not queued:
        body = error_body(
            "sync_in_progress", f"Source '{name}' has a run under way ({run.run_id})."
        )
        return JSONResponse({**body, "run": run.model_dump(mode="json")}, status_code=409)
    return run


@router.get("/{name}/runs", response_model=RunList)
def list_runs(
    index: AuthorizedIndex,
    name: SourceName,
    services: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
) -> RunList:
    """The source's runs, newest first (the one under way first)."""
    _get(services, index, name)
    return RunList(runs=source_store(services).runs(index, name, limit))


@router.delete(
    "/{name}/runs/{run_id}",
    status_code=202,
    response_model=Run,
    responses={
        404: {"description": "No such source (`source_not_found`) or run (`run_not_found`)"},
        409: {"description": "The run has ended (`run_state_conflict`)"},
    },
)
def cancel_run(
    index: AuthorizedIndex, name: SourceName, run_id: RunId, services: ServicesDep
) -> Run:
    """Cancel a queued or running run: it shows `cancelling` until the process running it
    stops, within about a second (a queued one, when a scheduler takes it), then ends
    `cancelled` with its jobs still pending cancelled; asking again answers the same."""
    _get(services, index, name)
    return source_store(services).cancel_run(index, name, run_id)
