"""The exception tree every stage raises; only `docingest/api/errors.py` maps it to HTTP.

    IngestError                       code: str, message: str
    ├── PermanentError                the document or the index's set-up is at fault:
    │   │                             retrying gives the same answer; the job fails with `code`
    │   ├── EmptyDocument             empty_document
    │   ├── UnsupportedFormat         unsupported_format
    │   ├── EncryptedDocument         encrypted_document
    │   ├── CorruptDocument           corrupt_document
    │   ├── NoTextFound               no_text_found
    │   ├── DocumentTooLarge          document_too_large
    │   ├── ExtractionTimeout         timeout (parsing ran past its CPU or wall-clock limit)
    │   ├── InvalidMetadata           invalid_metadata
    │   ├── EmbeddingFailed           embedding_failed
    │   └── InvalidEmbedding          validation_error (a model or dimensions its provider
    │       │                         cannot produce)
    │       └── UnknownProvider       validation_error (no embedding provider of that name)
    ├── RequestError                  the request cannot be served as asked (a 4xx); raised
    │   │                             in a job too (its index deleted meanwhile), it fails it
    │   ├── InvalidIndexName          invalid_index_name
    │   ├── IndexConflict             index_conflict
    │   ├── IndexNotFound             index_not_found
    │   ├── DocumentNotFound          document_not_found
    │   ├── InvalidFilter             invalid_filter
    │   ├── InvalidAccess             invalid_access (a bad access list or principal)
    │   ├── InvalidCursor             invalid_cursor (a page cursor this server did not make)
    │   ├── CursorExpired             cursor_expired (what it pages through was replaced)
    │   ├── InvalidExport             invalid_export (an import file truncated or damaged)
    │   ├── UploadTooLarge            upload_too_large
    │   ├── InvalidUpload             invalid_upload
    │   ├── JobNotFound               job_not_found
    │   ├── JobStateConflict          job_state_conflict
    │   ├── StoreNotHere              store_not_here
    │   ├── InvalidWebhook            invalid_webhook (a bad webhook name, events list, secret)
    │   ├── InvalidWebhookUrl         invalid_webhook_url (not http(s), malformed, unresolvable)
    │   ├── WebhookUrlNotAllowed      webhook_url_not_allowed (resolves to a private address)
    │   ├── WebhookNotFound           webhook_not_found
    │   ├── InvalidRerank             validation_error (a rerank config naming no provider)
    │   ├── InvalidSource             invalid_source (a bad source name, type, config, or a
    │   │                             target on a private address)
    │   ├── SourceNotFound            source_not_found
    │   ├── SyncInProgress            sync_in_progress (a run of the source is under way)
    │   ├── RunNotFound               run_not_found (a source has no run of that id)
    │   ├── RunStateConflict          run_state_conflict (cancel a run that has ended)
    │   ├── ApiKeyNotFound            api_key_not_found
    │   ├── Unauthorized              unauthorized
    │   └── Forbidden                 forbidden
    └── TransientError                worth retrying with backoff
        ├── ProviderRateLimited       rate_limited
        ├── ProviderTimeout           timeout
        ├── DependencyUnavailable     dependency_unavailable
        ├── EmbeddingUnavailable      embedding_failed (the provider kept failing; the job
        │                             is re-queued, and fails with this code at its last try)
        ├── EmbeddingBusy             embedding_busy (a search found every query-embedding
        │                             slot of its provider taken)
        ├── StoreLocked               store_locked (another process holds the embedded store)
        ├── DocumentBusy              document_busy
        └── StagingFull               staging_full (the staging quota or disk is full)

    SourceUnreadable                  a source run cannot read its source (bucket_not_found,
                                      access_denied, source_unreachable, source_error,
                                      folder_not_found): the run ends `failed` with it
    RerankFailed                      the second stage of a search failed (timeout,
                                      rate_limited, rerank_unavailable, rerank_refused,
                                      rerank_bad_reply, rerank_not_configured,
                                      rerank_busy): caught by
                                      the stage, reported in the response, never an HTTP error

    ControlSignal                     not an error: a job stopping on purpose, index as it was
    ├── Cancelled                     cancelled (the job ends `cancelled`)
    └── Superseded                    superseded (a newer upload of the document won)

The branches are disjoint, so an `except` chain over them does not depend on its order.
Third-party exceptions are translated once, where they are raised, with `raise ... from exc`.
"""

from __future__ import annotations


class _Coded(Exception):
    """An exception with a stable `code` (part of the API) and a message for people."""

    code: str = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, str]:
        """Return it in the contract's `{"code", "message"}` shape."""
        return {"code": self.code, "message": self.message}


class IngestError(_Coded):
    """Base of every docingest error; `code` is stable and part of the API."""

    code = "ingest_error"


class PermanentError(IngestError):
    """The input or configuration is at fault; retrying gives the same answer."""

    code = "permanent_error"


class RequestError(IngestError):
    """The request names what does not exist or is not allowed, or is malformed."""

    code = "request_error"


class TransientError(IngestError):
    """A dependency failed in a way that may pass; retry with backoff."""

    code = "transient_error"


class EmptyDocument(PermanentError):
    code = "empty_document"


class UnsupportedFormat(PermanentError):
    code = "unsupported_format"


class EncryptedDocument(PermanentError):
    code = "encrypted_document"


class CorruptDocument(PermanentError):
    code = "corrupt_document"


class NoTextFound(PermanentError):
    code = "no_text_found"


class DocumentTooLarge(PermanentError):
    code = "document_too_large"


class ExtractionTimeout(PermanentError):
    """Parsing the file ran past its CPU or wall-clock limit (a hostile or pathological file)."""

    code = "timeout"


class InvalidMetadata(PermanentError):
    code = "invalid_metadata"


class EmbeddingFailed(PermanentError):
    code = "embedding_failed"


class InvalidEmbedding(PermanentError):
    """An embedding config its provider cannot build: an unknown model, or dimensions the
    model cannot produce (the contract's code for a request that fails validation)."""

    code = "validation_error"


class UnknownProvider(InvalidEmbedding):
    """An embedding config names a provider that no `register_provider` call registered (the
    contract's code for a request that fails validation, as an unknown name did when the
    provider was a closed list)."""

    code = "validation_error"


class InvalidIndexName(RequestError):
    code = "invalid_index_name"


class IndexConflict(RequestError):
    """The index exists with other embedding or chunking settings."""

    code = "index_conflict"


class IndexNotFound(RequestError):
    code = "index_not_found"


class DocumentNotFound(RequestError):
    code = "document_not_found"


class InvalidFilter(RequestError):
    code = "invalid_filter"


class InvalidAccess(RequestError):
    """An access list or a principal that is not `user:<id>`, `group:<id>` or `public`."""

    code = "invalid_access"


class InvalidCursor(RequestError):
    """A listing's `cursor` is not one the service handed out."""

    code = "invalid_cursor"


class CursorExpired(RequestError):
    """A page cursor of a document version that is no longer the live one."""

    code = "cursor_expired"


class DocumentIngesting(RequestError):
    """A change to a document that a newer upload of it, still being ingested, would undo."""

    code = "document_ingesting"


class InvalidExport(RequestError):
    """A file given to `docingest import` that is not a whole, valid export."""

    code = "invalid_export"


class UploadTooLarge(RequestError):
    """The upload's file (or its whole body) is larger than the configured limit."""

    code = "upload_too_large"


class InvalidUpload(RequestError):
    """The upload is not a well-formed multipart form with one `file` part within its bounds."""

    code = "invalid_upload"


class JobNotFound(RequestError):
    code = "job_not_found"


class JobStateConflict(RequestError):
    """The job is in a state the request cannot apply to (cancel a finished job, ...)."""

    code = "job_state_conflict"


class StoreNotHere(RequestError):
    """The embedded store is owned by another process (the worker); this one cannot read it."""

    code = "store_not_here"


class InvalidWebhook(RequestError):
    """A webhook's name, events or secret break the rules (docs/guides/webhooks.md)."""

    code = "invalid_webhook"


class InvalidWebhookUrl(RequestError):
    """A webhook or callback URL that is not an absolute http(s) URL of a host that resolves."""

    code = "invalid_webhook_url"


class WebhookUrlNotAllowed(RequestError):
    """A webhook or callback URL whose host resolves to a loopback, link-local, private,
    multicast or unspecified address (unless `webhook_allow_private`)."""

    code = "webhook_url_not_allowed"


class WebhookNotFound(RequestError):
    code = "webhook_not_found"


class InvalidRerank(RequestError):
    """An index's `rerank` names a provider no `register_reranker` call registered."""

    code = "validation_error"


class InvalidSource(RequestError):
    code = "invalid_source"


class SourceNotFound(RequestError):
    code = "source_not_found"


class SyncInProgress(RequestError):
    """A run of the source is queued or running; `run` is it, as the API shows it."""

    code = "sync_in_progress"

    def __init__(self, message: str, run: object = None) -> None:
        super().__init__(message)
        self.run = run


class RunNotFound(RequestError):
    code = "run_not_found"


class RunStateConflict(RequestError):
    """The run has ended: there is nothing left to cancel."""

    code = "run_state_conflict"


class ApiKeyNotFound(RequestError):
    code = "api_key_not_found"


class Unauthorized(RequestError):
    """No API key, or an unknown one."""

    code = "unauthorized"


class Forbidden(RequestError):
    """The API key is valid but not for this index, role or document."""

    code = "forbidden"


class StoreLocked(TransientError):
    """The embedded store's directory is held by another process."""

    code = "store_locked"


class ProviderRateLimited(TransientError):
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ProviderTimeout(TransientError):
    code = "timeout"


class DependencyUnavailable(TransientError):
    code = "dependency_unavailable"


class StagingFull(TransientError):
    """An upload does not fit the staging directory's quota or its disk's free space: it
    may once staged uploads are processed or expire (the API answers 507)."""

    code = "staging_full"


class EmbeddingUnavailable(TransientError):
    """The provider failed every retry of a batch with errors that may pass (429, 5xx,
    timeouts): the job is re-queued with backoff to ride out the outage, and when its
    attempts are spent it fails with the contract's `embedding_failed`."""

    code = "embedding_failed"


class DocumentBusy(TransientError):
    """Another attempt holds the document's store lock (see `docingest.pipeline.store.fencing`)."""

    code = "document_busy"


class RerankFailed(_Coded):
    """The rerank stage could not re-order a search's candidates; `code` says why. The search
    still answers, in first-stage order, with this in its `rerank_error`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class SourceUnreadable(_Coded):
    """A source run cannot list or read its source at all; `code` says why (see the tree).
    One item that cannot be read is not this: it counts as failed and the run goes on."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class ControlSignal(_Coded):
    """A job stops on purpose (cancelled, or superseded by a newer upload): not an error, and
    no `except IngestError` catches it."""

    code = "control_signal"


class Superseded(ControlSignal):
    """A newer upload of the document was handed out while this attempt ran."""

    code = "superseded"

    def __init__(
        self, message: str = "A newer upload of this document exists; this attempt was dropped."
    ) -> None:
        super().__init__(message)


class Cancelled(ControlSignal):
    code = "cancelled"

    def __init__(self, message: str = "The job was cancelled; the index is as it was.") -> None:
        super().__init__(message)


class EmbeddingBusy(TransientError):
    """Every query-embedding slot of the index's provider is taken (a slow or hung endpoint,
    or more searches at once than `query_embedding_concurrency`): retry shortly."""

    code = "embedding_busy"
