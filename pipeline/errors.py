"""The exception tree every stage raises; only `api/errors.py` maps it to HTTP.

    IngestError                       code: str, message: str
    ├── PermanentError                retrying cannot help; the job fails with `code`
    │   ├── EmptyDocument             empty_document
    │   ├── UnsupportedFormat         unsupported_format
    │   ├── EncryptedDocument         encrypted_document
    │   ├── CorruptDocument           corrupt_document
    │   ├── NoTextFound               no_text_found
    │   ├── DocumentTooLarge          document_too_large
    │   ├── ExtractionTimeout         timeout (parsing ran past its CPU or wall-clock limit)
    │   ├── InvalidMetadata           invalid_metadata
    │   ├── EmbeddingFailed           embedding_failed
    │   ├── InvalidIndexName          invalid_index_name
    │   ├── IndexConflict             index_conflict
    │   ├── IndexNotFound             index_not_found
    │   ├── DocumentNotFound          document_not_found
    │   ├── InvalidFilter             invalid_filter
    │   ├── Superseded                superseded
    │   ├── Cancelled                 cancelled
    │   ├── UploadTooLarge            upload_too_large
    │   ├── InvalidUpload             invalid_upload
    │   ├── JobNotFound               job_not_found
    │   ├── JobStateConflict          job_state_conflict
    │   ├── StoreNotHere              store_not_here
    │   ├── Unauthorized              unauthorized
    │   └── Forbidden                 forbidden
    └── TransientError                worth retrying with backoff
        ├── ProviderRateLimited       rate_limited
        ├── ProviderTimeout           timeout
        ├── DependencyUnavailable     dependency_unavailable
        ├── EmbeddingUnavailable      embedding_failed (the provider kept failing; the job
        │                             is re-queued, and fails with this code at its last try)
        ├── StoreLocked               store_locked (another process holds the embedded store)
        └── DocumentBusy              document_busy

Third-party exceptions are translated once, where they are raised, with `raise ... from exc`.
"""

from __future__ import annotations


class IngestError(Exception):
    """Base of every docingest error; `code` is stable and part of the API."""

    code: str = "ingest_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, str]:
        """Return the error in the contract's `{"code", "message"}` shape."""
        return {"code": self.code, "message": self.message}


class PermanentError(IngestError):
    """The input or configuration is at fault; retrying gives the same answer."""

    code = "permanent_error"


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


class InvalidIndexName(PermanentError):
    code = "invalid_index_name"


class IndexConflict(PermanentError):
    """The index exists with other embedding or chunking settings."""

    code = "index_conflict"


class IndexNotFound(PermanentError):
    code = "index_not_found"


class DocumentNotFound(PermanentError):
    code = "document_not_found"


class InvalidFilter(PermanentError):
    code = "invalid_filter"


class StoreLocked(TransientError):
    """The embedded store's directory is held by another process."""

    code = "store_locked"


class Superseded(PermanentError):
    """A newer upload of the document was handed out while this attempt ran."""

    code = "superseded"

    def __init__(
        self, message: str = "A newer upload of this document exists; this attempt was dropped."
    ) -> None:
        super().__init__(message)


class Cancelled(PermanentError):
    code = "cancelled"

    def __init__(self, message: str = "The job was cancelled; the index is as it was.") -> None:
        super().__init__(message)


class UploadTooLarge(PermanentError):
    """The upload's file (or its whole body) is larger than the configured limit."""

    code = "upload_too_large"


class InvalidUpload(PermanentError):
    """The upload is not a well-formed multipart form with one `file` part within its bounds."""

    code = "invalid_upload"


class JobNotFound(PermanentError):
    code = "job_not_found"


class JobStateConflict(PermanentError):
    """The job is in a state the request cannot apply to (cancel a finished job, ...)."""

    code = "job_state_conflict"


class StoreNotHere(PermanentError):
    """The embedded store is owned by another process (the worker); this one cannot read it."""

    code = "store_not_here"


class Unauthorized(PermanentError):
    """No API key, or an unknown one."""

    code = "unauthorized"


class Forbidden(PermanentError):
    """The API key is valid but not for this index."""

    code = "forbidden"


class ProviderRateLimited(TransientError):
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ProviderTimeout(TransientError):
    code = "timeout"


class DependencyUnavailable(TransientError):
    code = "dependency_unavailable"


class EmbeddingUnavailable(TransientError):
    """The provider failed every retry of a batch with errors that may pass (429, 5xx,
    timeouts): the job is re-queued with backoff to ride out the outage, and when its
    attempts are spent it fails with the contract's `embedding_failed`."""

    code = "embedding_failed"


class DocumentBusy(TransientError):
    """Another attempt holds the document's store lock (see `pipeline.store.fencing`)."""

    code = "document_busy"
