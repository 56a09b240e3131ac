"""`/v1/indexes/{index}/documents`: upload (→ a job), list, show and delete documents."""

from __future__ import annotations

import unicodedata
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from docingest.api.deps import AuthorizedIndex, ServicesDep, StateDep, StoreDep
from docingest.api.enqueue import enqueue
from docingest.api.query_filter import FILTER_HELP, filter_param
from docingest.api.upload import receive_upload
from docingest.pipeline import metrics
from docingest.pipeline.documents import (
    MAX_DELETE,
    delete_matching,
    list_documents_page,
    patch_metadata,
)
from docingest.pipeline.errors import EmptyDocument, InvalidFilter, InvalidUpload, InvalidWebhook
from docingest.pipeline.ingest.staging import check_room
from docingest.pipeline.jobs.job import JobSpec
from docingest.pipeline.keys import JobStatus
from docingest.pipeline.metadata import parse_user_metadata
from docingest.pipeline.settings import Settings
from docingest.pipeline.store import SearchFilter, StoredDocument, VectorStore, chunk_pages
from docingest.pipeline.store.chunk_pages import ChunkPage, document_chunks
from docingest.pipeline.store.documents import MAX_PAGE
from docingest.pipeline.store.schema import validate_metadata
from docingest.pipeline.webhooks.urls import MAX_SECRET_CHARS, MIN_SECRET_CHARS, check_url

router = APIRouter(prefix="/v1/indexes/{index}/documents", tags=["documents"])

MAX_DOCUMENT_ID_CHARS = 512
DEFAULT_PAGE = 100
"""Documents per listing page when a paging request names no `limit`."""

_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "document_id": {"type": "string", "maxLength": MAX_DOCUMENT_ID_CHARS},
                        "metadata": {
                            "type": "string",
                            "description": "A JSON object of user metadata.",
                        },
                        "force": {"type": "boolean", "default": False},
                        "callback_url": {
                            "type": "string",
                            "description": "An http(s) URL that receives this job's "
                            "job.completed, job.failed or job.cancelled event.",
                        },
                        "callback_secret": {
                            "type": "string",
                            "description": "Signs the callback's deliveries (16-256 "
                            "characters); without it they are not signed.",
                        },
                    },
                }
            }
        },
    }
}


class UploadAccepted(BaseModel):
    job_id: str
    index: str
    document_id: str
    status: JobStatus
    status_url: str


class DocumentList(BaseModel):
    documents: list[StoredDocument]
    next_cursor: str | None = None
    """Pass as `cursor` for the next page; null on the last page (and for a v1 request)."""


class MetadataPatch(BaseModel):
    metadata: Any = Field(description="The new user metadata, a JSON object; {} removes it.")


class DeletedDocuments(BaseModel):
    deleted: int
    more: bool
    """Whether more documents match: the request stopped at `limit`; send it again."""


def _document_id(raw: str | None, filename: str) -> str:
    document_id = (raw or "").strip() or filename
    if len(document_id) > MAX_DOCUMENT_ID_CHARS or any(
        unicodedata.category(char) == "Cc" for char in document_id
    ):
        raise InvalidUpload(
            f"document_id must be 1-{MAX_DOCUMENT_ID_CHARS} characters without control characters."
        )
    return document_id


def _flag(raw: str | None) -> bool:
    value = (raw or "false").strip().lower()
    if value not in {"true", "false", "1", "0", "yes", "no", "on", "off", ""}:
        raise InvalidUpload(f"force must be true or false, not {raw!r}.")
    return value in {"true", "1", "yes", "on"}


async def _callback(fields: dict[str, str], settings: Settings) -> tuple[str | None, str | None]:
    """The upload's `callback_url` (checked as a webhook's is) and `callback_secret`."""
    url = (fields.get("callback_url") or "").strip() or None
    secret = fields.get("callback_secret") or None
    if url is None:
        if secret is not None:
            raise InvalidWebhook("callback_secret was given without a callback_url.")
        return None, None
    if secret is not None and not MIN_SECRET_CHARS <= len(secret) <= MAX_SECRET_CHARS:
        raise InvalidWebhook(
            f"callback_secret must be {MIN_SECRET_CHARS}-{MAX_SECRET_CHARS} characters."
        )
    await run_in_threadpool(check_url, url, allow_private=settings.webhook_allow_private)
    return url, secret


@router.post(
    "",
    status_code=202,
    response_model=UploadAccepted,
    openapi_extra=_UPLOAD_BODY,
    responses={
        413: {"description": "Upload too large"},
        400: {"description": "Bad upload"},
        507: {"description": "Staging area full (retry later)"},
    },
)
async def upload_document(
    index: AuthorizedIndex, request: Request, state: StateDep
) -> UploadAccepted:
    """Stage the upload, record a queued job and return at once; a worker does the rest."""
    services = state.services
    settings = services.settings
    job_id = uuid.uuid4().hex
    destination = services.staged_path(job_id)
    received = await receive_upload(
        request,
        destination=destination,
        max_file_bytes=settings.max_upload_bytes,
        check_room=lambda more_bytes: check_room(settings, more_bytes=more_bytes),
    )
    try:
        if received.size == 0:
            raise EmptyDocument("The uploaded file is empty (0 bytes).")
        metadata = parse_user_metadata(
            received.fields.get("metadata"), max_bytes=settings.max_metadata_bytes
        )
        callback_url, callback_secret = await _callback(received.fields, settings)
        spec = JobSpec(
            job_id=job_id,
            index=index,
            document_id=_document_id(received.fields.get("document_id"), received.filename),
            filename=received.filename,
            staged_name=job_id,
            size_bytes=received.size,
            content_sha256=received.sha256,
            content_type=received.content_type,
            metadata=metadata,
            force=_flag(received.fields.get("force")),
            callback_url=callback_url,
            callback_secret=callback_secret,
        )
        if services.owns_store:  # so the index is listed at once; else the worker creates it
            config = await run_in_threadpool(services.ensure_index, index)
            # Refused before a job exists; without the store here the worker checks instead.
            validate_metadata(metadata, config.metadata_schema)
        job = await run_in_threadpool(services.jobs.create, spec)
    except BaseException:
        destination.unlink(missing_ok=True)
        raise
    await run_in_threadpool(enqueue, state.celery, services.jobs, job_id)
    metrics.UPLOADS.inc()
    metrics.UPLOAD_BYTES.inc(received.size)
    return UploadAccepted(
        job_id=job.job_id,
        index=index,
        document_id=job.document_id,
        status=job.status,
        status_url=f"/v1/jobs/{job.job_id}",
    )


@router.get("", response_model=DocumentList)
def list_documents(
    index: AuthorizedIndex,
    store: StoreDep,
    filter: Annotated[str | None, Query(description=FILTER_HELP)] = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_PAGE)] = None,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> DocumentList:
    """Documents in `document_id` order, a page of `limit` (default 100) at a time.

    A request with none of `filter`, `limit` and `cursor` is a v1 request and gets every
    document in one answer, as v1 did (`next_cursor` null); paging clients send `limit`.
    """
    search_filter = _parse_filter(filter, store, index)
    if filter is None and limit is None and cursor is None:
        return DocumentList(documents=store.list_documents(index))
    documents, following = list_documents_page(
        store, index, limit=limit or DEFAULT_PAGE, filter=search_filter, cursor=cursor
    )
    return DocumentList(documents=documents, next_cursor=following)


@router.delete(
    "",
    status_code=202,
    response_model=DeletedDocuments,
    responses={
        400: {
            "description": "No filter, or one that matches every document (pass all=true, "
            "alone, to delete every document)"
        }
    },
)
def delete_documents(
    index: AuthorizedIndex,
    services: ServicesDep,
    filter: Annotated[str | None, Query(description=FILTER_HELP)] = None,
    all: Annotated[bool, Query(description="Delete every document (with no filter).")] = False,
    limit: Annotated[int, Query(ge=1, le=MAX_DELETE)] = MAX_DELETE,
) -> DeletedDocuments:
    """Delete up to `limit` documents the filter matches, each as a single DELETE does;
    `more` says whether others still match (send the request again). A filter that matches
    every document is refused like no filter (`delete_matching`): that takes all=true."""
    search_filter = _parse_filter(filter, services.store, index)
    if all and filter is not None:
        raise InvalidFilter("all=true deletes every document; send it without a filter.")
    if search_filter is None and not all:
        raise InvalidFilter(
            "Deleting by filter needs a filter that names at least one field; to delete every "
            "document of the index, send all=true (or DELETE the index itself)."
        )
    outcome = delete_matching(services, index, search_filter, limit=limit)
    return DeletedDocuments(deleted=outcome.deleted, more=outcome.more)


@router.get("/{document_id:path}/chunks", response_model=ChunkPage)
def list_chunks(
    index: AuthorizedIndex,
    document_id: str,
    store: StoreDep,
    limit: int = Query(default=chunk_pages.DEFAULT_PAGE, ge=1, le=chunk_pages.MAX_PAGE),
    cursor: str | None = Query(default=None, max_length=200),
) -> ChunkPage:
    """The live version's chunks in order, a page at a time (declared before the document's
    own route, whose path would take `.../chunks` as part of the id)."""
    return document_chunks(store, index, document_id, limit=limit, cursor=cursor)


@router.get("/{document_id:path}", response_model=StoredDocument)
def get_document(index: AuthorizedIndex, document_id: str, store: StoreDep) -> StoredDocument:
    return store.get_document(index, document_id)


@router.patch("/{document_id:path}", response_model=StoredDocument)
def patch_document(
    index: AuthorizedIndex, document_id: str, body: MetadataPatch, services: ServicesDep
) -> StoredDocument:
    """Replace the document's user metadata on every chunk of its live version at once,
    without parsing or embedding it again (`docingest.pipeline.documents.patch_metadata`)."""
    return patch_metadata(services, index, document_id, body.metadata)


def _parse_filter(raw: str | None, store: VectorStore, index: str) -> SearchFilter | None:
    """The filter parameter read against the index's `metadata_schema`, as a search reads
    it, so a filter selects the same documents everywhere (an unknown index: no schema; the
    store answers `index_not_found` next)."""
    parsed = filter_param(raw)
    if parsed is None:
        return None
    config = store.index_config(index)
    return SearchFilter.parse(parsed, schema=None if config is None else config.metadata_schema)


@router.delete("/{document_id:path}", status_code=204)
def delete_document(index: AuthorizedIndex, document_id: str, services: ServicesDep) -> Response:
    """Remove the document's chunks (every version); a job still storing an older upload of
    it is superseded first (`Services.delete_document`)."""
    services.delete_document(index, document_id)
    return Response(status_code=204)
