"""Every endpoint of the HTTP API (v1.2) as a function that builds its `Call`: the one place that
knows paths, parameters and bodies. `Client` and `AsyncClient` send these unchanged."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from docingest._core import Call, Source, Upload, field_of, model, nothing, seg, text
from docingest.models import (
    Chunking,
    ChunkPage,
    DeleteResult,
    Delivery,
    DeliveryList,
    Document,
    DocumentPage,
    Embedding,
    Expand,
    FieldType,
    IndexDetail,
    IndexInfo,
    IndexList,
    IndexSettings,
    Job,
    JobList,
    MetadataUpdate,
    Rerank,
    RerankOptions,
    SearchMode,
    SearchRequest,
    SearchResponse,
    SourceInfo,
    SourceList,
    SourceRun,
    SourceRunList,
    SourceSettings,
    UploadAccepted,
    Webhook,
    WebhookEventName,
    WebhookList,
    WebhookSubscription,
)

Json = dict[str, Any]


def _filter_param(filter: Mapping[str, Any] | None) -> str | None:
    return None if filter is None else json.dumps(filter, ensure_ascii=False)


# --- operations ---


def health() -> Call[Json]:
    """`GET /healthz`: `{"status": "ok"}` while the service runs."""
    return Call("GET", "/healthz", lambda r: r.json())


def ready() -> Call[Json]:
    """`GET /readyz`: each dependency's state (answered, not raised, when one is down)."""
    return Call("GET", "/readyz", lambda r: r.json(), ok_statuses=frozenset({503}))


def metrics() -> Call[str]:
    """`GET /metrics`: the Prometheus text."""
    return Call("GET", "/metrics", text)


# --- indexes ---


def create_index(
    index: str,
    *,
    embedding: Embedding | Mapping[str, Any] | None = None,
    chunking: Chunking | Mapping[str, Any] | None = None,
    description: str | None = None,
    rerank: Rerank | Mapping[str, Any] | None = None,
    metadata_schema: Mapping[str, FieldType] | None = None,
    contextual_headers: bool | None = None,
) -> Call[IndexInfo]:
    """`PUT /v1/indexes/{index}`: create it, or confirm it exists with these settings
    (`Conflict` if its embedding or chunking differ)."""
    body = IndexSettings.model_validate(
        {
            "embedding": embedding,
            "chunking": chunking,
            "description": description,
            "rerank": rerank,
            "metadata_schema": metadata_schema,
            "contextual_headers": contextual_headers,
        }
    )
    return Call("PUT", f"/v1/indexes/{seg(index)}", model(IndexInfo), json=body.to_json())


def list_indexes() -> Call[list[IndexDetail]]:
    """`GET /v1/indexes`: every index this key may use."""
    return Call("GET", "/v1/indexes", field_of(IndexList, "indexes"))


def get_index(index: str) -> Call[IndexDetail]:
    """`GET /v1/indexes/{index}`: settings, counts and usage."""
    return Call("GET", f"/v1/indexes/{seg(index)}", model(IndexDetail))


def delete_index(index: str) -> Call[None]:
    """`DELETE /v1/indexes/{index}`: the index and all its vectors."""
    return Call("DELETE", f"/v1/indexes/{seg(index)}", nothing)


# --- ingestion and jobs ---


def upload(
    index: str,
    file: Source,
    *,
    filename: str | None = None,
    document_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    force: bool = False,
    callback_url: str | None = None,
) -> Call[UploadAccepted]:
    """`POST /v1/indexes/{index}/documents`: `file` is a path, bytes or a binary stream (sent
    in chunks). The answer names the job; `wait()` follows it."""
    data: dict[str, str] = {"force": "true" if force else "false"}
    if document_id is not None:
        data["document_id"] = document_id
    if metadata:
        data["metadata"] = json.dumps(metadata, ensure_ascii=False)
    if callback_url is not None:
        data["callback_url"] = callback_url
    return Call(
        "POST",
        f"/v1/indexes/{seg(index)}/documents",
        model(UploadAccepted),
        data=data,
        upload=Upload.of(file, filename),
    )


def get_job(job_id: str) -> Call[Job]:
    """`GET /v1/jobs/{job_id}`: status, stage, counters, result or error."""
    return Call("GET", f"/v1/jobs/{seg(job_id)}", model(Job))


def list_jobs(
    *,
    index: str | None = None,
    status: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[JobList]:
    """`GET /v1/jobs`: recent jobs, newest first."""
    params = {"index": index, "status": status, "limit": limit, "cursor": cursor}
    return Call("GET", "/v1/jobs", model(JobList), params=params)


def cancel_job(job_id: str) -> Call[Job]:
    """`DELETE /v1/jobs/{job_id}`: the index is left as it was before the job."""
    return Call("DELETE", f"/v1/jobs/{seg(job_id)}", model(Job))


def retry_job(job_id: str) -> Call[Job]:
    """`POST /v1/jobs/{job_id}/retry`: re-queue a failed or cancelled job."""
    return Call("POST", f"/v1/jobs/{seg(job_id)}/retry", model(Job))


# --- documents ---


def list_documents(
    index: str,
    *,
    filter: Mapping[str, Any] | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[DocumentPage]:
    """`GET /v1/indexes/{index}/documents`: one page (v1.2: filtered, by `document_id`)."""
    params = {"filter": _filter_param(filter), "limit": limit, "cursor": cursor}
    return Call("GET", f"/v1/indexes/{seg(index)}/documents", model(DocumentPage), params=params)


def get_document(index: str, document_id: str) -> Call[Document]:
    """`GET /v1/indexes/{index}/documents/{document_id}`."""
    return Call("GET", f"/v1/indexes/{seg(index)}/documents/{seg(document_id)}", model(Document))


def update_metadata(index: str, document_id: str, metadata: Mapping[str, Any]) -> Call[Document]:
    """v1.2 `PATCH .../documents/{document_id}`: replace its user metadata on every chunk
    at once, without re-parsing or re-embedding."""
    body = MetadataUpdate(metadata=dict(metadata))
    return Call(
        "PATCH",
        f"/v1/indexes/{seg(index)}/documents/{seg(document_id)}",
        model(Document),
        json=body.to_json(),
    )


def delete_document(index: str, document_id: str) -> Call[None]:
    """`DELETE .../documents/{document_id}`: its chunks are removed."""
    return Call("DELETE", f"/v1/indexes/{seg(index)}/documents/{seg(document_id)}", nothing)


def delete_documents(
    index: str,
    filter: Mapping[str, Any] | None = None,
    *,
    all_documents: bool = False,
    limit: int | None = None,
) -> Call[DeleteResult]:
    """v1.2 `DELETE .../documents?filter=`: up to `limit` matching documents (the server's
    bound by default); `more` says whether others still match. A filter that matches every
    document is refused (400 `invalid_filter`): send `all_documents=True`, without a filter,
    to delete them all (the request's `all=true`)."""
    return Call(
        "DELETE",
        f"/v1/indexes/{seg(index)}/documents",
        model(DeleteResult),
        params={
            "filter": _filter_param(filter),
            "all": "true" if all_documents else None,
            "limit": limit,
        },
    )


def list_chunks(
    index: str, document_id: str, *, limit: int | None = None, cursor: str | None = None
) -> Call[ChunkPage]:
    """v1.2 `GET .../documents/{document_id}/chunks`: the live version's chunks in order."""
    return Call(
        "GET",
        f"/v1/indexes/{seg(index)}/documents/{seg(document_id)}/chunks",
        model(ChunkPage),
        params={"limit": limit, "cursor": cursor},
    )


# --- search ---


def search(
    index: str,
    query: str,
    *,
    top_k: int | None = None,
    mode: SearchMode | None = None,
    filter: Mapping[str, Any] | None = None,
    max_chunks_per_document: int | None = None,
    score_threshold: float | None = None,
    rerank: bool | RerankOptions | Mapping[str, Any] | None = None,
    expand: Expand | Mapping[str, Any] | None = None,
    excerpt: bool | None = None,
    explain: bool | None = None,
) -> Call[SearchResponse]:
    """`POST /v1/indexes/{index}/search`. An option left None is not sent, so the server's
    default applies (and a v1.1 server is never sent a v1.2 field unasked)."""
    body = SearchRequest.model_validate(
        {
            "query": query,
            "top_k": top_k,
            "mode": mode,
            "filter": filter,
            "max_chunks_per_document": max_chunks_per_document,
            "score_threshold": score_threshold,
            "rerank": rerank,
            "expand": expand,
            "excerpt": excerpt,
            "explain": explain,
        }
    )
    return Call(
        "POST", f"/v1/indexes/{seg(index)}/search", model(SearchResponse), json=body.to_json()
    )


# --- webhooks ---


def put_webhook(
    index: str,
    name: str,
    url: str,
    *,
    events: list[WebhookEventName] | None = None,
    secret: str | None = None,
) -> Call[Webhook]:
    """v1.2 `PUT /v1/indexes/{index}/webhooks/{name}`: subscribe `url` to the index's events,
    signed with `secret` (check deliveries with `docingest.verify_signature`)."""
    body = WebhookSubscription.model_validate(
        {"url": url, "secret": secret} | ({"events": events} if events is not None else {})
    )
    return Call(
        "PUT", f"/v1/indexes/{seg(index)}/webhooks/{seg(name)}", model(Webhook), json=body.to_json()
    )


def list_webhooks(index: str) -> Call[list[Webhook]]:
    """v1.2 `GET /v1/indexes/{index}/webhooks`: the subscriptions, without secrets."""
    return Call("GET", f"/v1/indexes/{seg(index)}/webhooks", field_of(WebhookList, "webhooks"))


def get_webhook(index: str, name: str) -> Call[Webhook]:
    """v1.2 `GET /v1/indexes/{index}/webhooks/{name}`: one subscription, without its secret."""
    return Call("GET", f"/v1/indexes/{seg(index)}/webhooks/{seg(name)}", model(Webhook))


def delete_webhook(index: str, name: str) -> Call[None]:
    """v1.2 `DELETE /v1/indexes/{index}/webhooks/{name}`."""
    return Call("DELETE", f"/v1/indexes/{seg(index)}/webhooks/{seg(name)}", nothing)


def list_deliveries(index: str, name: str) -> Call[list[Delivery]]:
    """v1.2 `GET .../webhooks/{name}/deliveries`: recent deliveries with their status."""
    return Call(
        "GET",
        f"/v1/indexes/{seg(index)}/webhooks/{seg(name)}/deliveries",
        field_of(DeliveryList, "deliveries"),
    )


# --- sources ---


def put_source(
    index: str,
    name: str,
    type: str,
    config: Mapping[str, Any],
    *,
    every: str | None = None,
    prune: bool | None = None,
    metadata: Mapping[str, Any] | None = None,
    access: list[str] | None = None,
) -> Call[SourceInfo]:
    """v1.3 `PUT /v1/indexes/{index}/sources/{name}`: keep the index in sync with a bucket
    (`s3`), a website (`web`) or a server folder (`folder`), every `every` (`"15m"`) when
    given. Secrets in `config` are write-only: answers show them as "***"."""
    body = SourceSettings.model_validate(
        {
            "type": type,
            "config": dict(config),
            "schedule": {"every": every} if every is not None else None,
            "prune": prune,
            "metadata": dict(metadata) if metadata is not None else None,
            "access": access,
        }
    )
    return Call(
        "PUT",
        f"/v1/indexes/{seg(index)}/sources/{seg(name)}",
        model(SourceInfo),
        json=body.to_json(),
    )


def list_sources(index: str) -> Call[list[SourceInfo]]:
    """v1.3 `GET /v1/indexes/{index}/sources`: the index's sources with their last runs."""
    return Call("GET", f"/v1/indexes/{seg(index)}/sources", field_of(SourceList, "sources"))


def get_source(index: str, name: str) -> Call[SourceInfo]:
    """v1.3 `GET /v1/indexes/{index}/sources/{name}`."""
    return Call("GET", f"/v1/indexes/{seg(index)}/sources/{seg(name)}", model(SourceInfo))


def delete_source(index: str, name: str, *, delete_documents: bool = False) -> Call[None]:
    """v1.3 `DELETE /v1/indexes/{index}/sources/{name}`; `delete_documents` also deletes the
    documents it brought."""
    return Call(
        "DELETE",
        f"/v1/indexes/{seg(index)}/sources/{seg(name)}",
        nothing,
        params={"delete_documents": "true" if delete_documents else None},
    )


def sync_source(index: str, name: str) -> Call[SourceRun]:
    """v1.3 `POST .../sources/{name}/sync`: queue a run now (409 `sync_in_progress` when one
    is under way)."""
    return Call("POST", f"/v1/indexes/{seg(index)}/sources/{seg(name)}/sync", model(SourceRun))


def list_source_runs(index: str, name: str, *, limit: int | None = None) -> Call[list[SourceRun]]:
    """v1.3 `GET .../sources/{name}/runs`: the runs, newest first."""
    return Call(
        "GET",
        f"/v1/indexes/{seg(index)}/sources/{seg(name)}/runs",
        field_of(SourceRunList, "runs"),
        params={"limit": limit},
    )


# --- paged listings ---


def documents_page(index: str, filter: Mapping[str, Any] | None, page_size: int | None) -> Any:
    return lambda cursor: list_documents(index, filter=filter, limit=page_size, cursor=cursor)


def chunks_page(index: str, document_id: str, page_size: int | None) -> Any:
    return lambda cursor: list_chunks(index, document_id, limit=page_size, cursor=cursor)


def jobs_page(index: str | None, status: str | None, page_size: int | None) -> Any:
    return lambda cursor: list_jobs(index=index, status=status, limit=page_size, cursor=cursor)
