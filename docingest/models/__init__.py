"""Typed models of every request and response of API.md v1.2 (pydantic).

Response models keep fields a newer server adds and default those an older one omits;
request bodies send only the fields the caller set."""

from docingest.models._base import ErrorInfo
from docingest.models.documents import (
    Chunk,
    ChunkPage,
    DeleteResult,
    Document,
    DocumentPage,
    MetadataUpdate,
    OcrInfo,
)
from docingest.models.indexes import (
    Chunking,
    Embedding,
    FieldType,
    IndexInfo,
    IndexList,
    IndexSettings,
    IndexUsage,
    Rerank,
)
from docingest.models.jobs import TERMINAL, Job, JobList, JobResult, JobStage, JobStatus, UploadAccepted
from docingest.models.search import (
    Context,
    Excerpt,
    Expand,
    Explain,
    RerankOptions,
    Scores,
    SearchMode,
    SearchRequest,
    SearchResponse,
    SearchResult,
)
from docingest.models.webhooks import (
    Delivery,
    DeliveryList,
    Webhook,
    WebhookEvent,
    WebhookEventName,
    WebhookList,
    WebhookSubscription,
)

__all__ = [
    "TERMINAL",
    "Chunk",
    "ChunkPage",
    "Chunking",
    "Context",
    "DeleteResult",
    "Delivery",
    "DeliveryList",
    "Document",
    "DocumentPage",
    "Embedding",
    "ErrorInfo",
    "Excerpt",
    "Expand",
    "Explain",
    "FieldType",
    "IndexInfo",
    "IndexList",
    "IndexSettings",
    "IndexUsage",
    "Job",
    "JobList",
    "JobResult",
    "JobStage",
    "JobStatus",
    "MetadataUpdate",
    "OcrInfo",
    "Rerank",
    "RerankOptions",
    "Scores",
    "SearchMode",
    "SearchRequest",
    "SearchResponse",
    "SearchResult",
    "UploadAccepted",
    "Webhook",
    "WebhookEvent",
    "WebhookEventName",
    "WebhookList",
    "WebhookSubscription",
]
