"""The one configuration object, read from `DOCINGEST_*` environment variables."""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from docingest.pipeline.settings.database import DatabaseSettings
from docingest.pipeline.settings.ocr import OcrSettings
from docingest.pipeline.settings.rerank import RerankSettings
from docingest.pipeline.settings.search import SearchSettings
from docingest.pipeline.settings.sources import SourceSettings
from docingest.pipeline.settings.webhooks import WebhookSettings


class ChunkUnit(StrEnum):
    """What `chunk_size` and `chunk_overlap` are measured in."""

    CHARS = "chars"
    TOKENS = "tokens"


def _default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "docingest"


class ApiKey(BaseModel):
    """One API key, given in clear (`key`) or as the hex sha256 of the key (`sha256`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: SecretStr | None = None
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$")
    indexes: list[str] | None = None
    """Indexes the key may use; None allows all."""
    name: str | None = None
    """A label for logs (never the key itself)."""
    role: Literal["admin", "service", "user"] = "admin"
    """What it may do (docs/guides/access-control.md); a `user` key holds `principals`."""
    principals: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_form(self) -> ApiKey:
        if (self.key is None) == (self.sha256 is None):
            raise ValueError("give each API key as exactly one of 'key' or 'sha256'")
        return self

    def digest(self) -> bytes:
        """Return the sha256 of the key, the form keys are compared in."""
        if self.key is not None:
            return hashlib.sha256(self.key.get_secret_value().encode()).digest()
        assert self.sha256 is not None
        return bytes.fromhex(self.sha256)


MAX_CHUNK_SIZE = 32_768
"""The largest `chunk_size`, in either unit: the longest input of any embedding model we know
is 8,192 tokens (about 32,000 characters), so a longer chunk is cut by the model and its
tail can be found only by keyword, and one search result would be a whole book."""


def check_chunk_overlap(chunk_size: int, chunk_overlap: int) -> None:
    """Refuse an overlap that is not smaller than the chunk (each chunk must move on)."""
    if chunk_overlap >= chunk_size:
        raise ValueError("chunk_overlap must be smaller than chunk_size")


class Settings(
    DatabaseSettings, OcrSettings, RerankSettings, SearchSettings, SourceSettings, WebhookSettings
):
    """Every knob of docingest. Build it with `get_settings()`; never at import time."""

    model_config = SettingsConfigDict(
        env_prefix="DOCINGEST_", env_file=None, extra="ignore", frozen=True
    )

    # --- storage locations -------------------------------------------------------------
    data_dir: Path = Field(default_factory=_default_data_dir)
    """Root for everything kept on disk: staged uploads, the embedded store, private Redis."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis used as Celery broker and for job state."""

    qdrant_url: str | None = None
    """Qdrant server, cluster or Qdrant Cloud URL; unset means the embedded store (Qdrant Edge
    shards under `data_dir/edge`). ":memory:" is qdrant-client's in-memory local mode, the
    server's stand-in in tests (a linear scan that keeps nothing: not for deployments)."""

    edge_optimize_after_points: int | None = Field(default=None, ge=1000)
    """Embedded store: points written to an index before its HNSW index is built for them;
    unset: 12 MiB of its dense vectors (2,048 points of 1,536 dimensions, 8,192 of 384). Each
    build pauses the process for its length (BENCHMARKS.md, "Sustained ingestion"); larger
    means fewer, longer pauses and more unindexed points for searches to scan."""

    edge_idle_close_seconds: float = Field(default=60.0, ge=0)
    """Embedded store: seconds an index's shard stays open after its last use; each open
    shard holds threads and memory of its own (BENCHMARKS.md, "Idle indexes"), and the next
    use loads it again (milliseconds for a small index)."""

    qdrant_api_key: SecretStr | None = None
    """API key for the Qdrant server, if it requires one."""

    qdrant_shard_number: int | None = Field(default=None, gt=0)
    """Shards of each new collection (cluster); None = the server's default."""

    qdrant_replication_factor: int | None = Field(default=None, gt=0)
    """Copies of each shard of a new collection (cluster); None = the server's default."""

    qdrant_write_consistency_factor: int | None = Field(default=None, gt=0)
    """Replicas that must confirm a write to a new collection; None = the server's default."""

    collection_prefix: str = "docingest_"
    """Prefix of every Qdrant collection name, so several deployments can share a server."""

    # --- input limits ------------------------------------------------------------------
    max_upload_bytes: int = Field(default=100 * 1024 * 1024, gt=0)
    """Largest accepted upload, in bytes; larger uploads are refused with 413."""

    max_pages: int = Field(default=5000, gt=0)
    """Largest PDF or TIFF (in pages) or PPTX (in slides) that is extracted; larger ones fail
    with `document_too_large`."""

    max_extracted_chars: int = Field(default=50_000_000, gt=0)
    """Most characters of text one document may yield before `document_too_large`."""

    max_chunks_per_document: int = Field(default=20_000, gt=0)
    """Most chunks one document may be split into: the job fails with `document_too_large` as
    soon as the count passes it, while the document is still being read, so a small upload of
    a pathological shape (millions of cells or MIME parts) cannot hold a worker for hours.
    Above every real document measured (BENCHMARKS.md, "Chunks per document")."""

    max_docx_uncompressed_bytes: int = Field(default=512 * 1024 * 1024, gt=0)
    """Total uncompressed size the ZIP members of a DOCX, XLSX, PPTX, ODT or EPUB may declare
    (zip-bomb guard; the name predates the other ZIP-based formats)."""

    max_docx_compression_ratio: float = Field(default=200.0, gt=1)
    """Largest uncompressed/compressed ratio a member of a DOCX, XLSX, PPTX, ODT or EPUB may
    have (zip-bomb guard)."""

    max_attachment_depth: int = Field(default=3, ge=0)
    """How deep e-mail attachments are extracted: 1 reads a message's own attachments, 2
    also those of a message attached to it, and so on; deeper ones are listed by name."""

    max_mbox_messages: int = Field(default=20_000, gt=0)
    """Most messages an mbox archive may hold; past it the upload fails with
    `document_too_large` from one scan of the separators, before a message is parsed (split
    the archive). Counts up to `max_chunks_per_document` at most (`mbox_message_limit`): every
    message is at least one chunk, so a larger cap could never be reached."""

    extraction_memory_bytes: int = Field(default=3 * 1024**3, gt=256 * 1024**2)
    """Address-space limit of the child process that parses one upload (bomb guard)."""

    extraction_cpu_seconds: int = Field(default=900, gt=0)
    """CPU seconds the parsing child may use before it is killed (`timeout`), OCR grants
    included: room for the longest text PDF and for a long scan read page by page by OCR
    (what each costs: BENCHMARKS.md, "PDF engines and OCR")."""

    extraction_cpu_seconds_per_mb: float = Field(default=60.0, gt=0)
    """CPU seconds a file gets per MiB on top of one minute, up to `extraction_cpu_seconds`:
    the 6.2 MiB R manual gets 433 s, a 64 KiB Markdown file that hangs its parser 63 s."""

    extraction_timeout_seconds: float = Field(default=1800.0, gt=0)
    """Wall-clock seconds parsing one upload may take before its child is killed."""

    isolate_extraction: bool = True
    """Parse uploads in a limited child process (keep on: a hostile file then kills only it)."""

    max_image_pixels: int = Field(default=100_000_000, gt=0)
    """Most pixels an uploaded image (each TIFF page) may declare, and the most a PDF page is
    rendered to for OCR (a larger page is rendered at a lower resolution, down to 72 DPI);
    beyond that `document_too_large`. 100 million is an A3 page scanned at 600 DPI, twice."""

    max_metadata_bytes: int = Field(default=16 * 1024, gt=0)
    """Largest user metadata object, measured as compact JSON in UTF-8."""

    # --- chunking defaults (per index overridable) ------------------------------------
    chunk_size: int = Field(default=1000, gt=0, le=MAX_CHUNK_SIZE)
    """Target chunk size in `chunk_unit`, at most `MAX_CHUNK_SIZE` (32,768)."""

    chunk_overlap: int = Field(default=150, ge=0)
    """Overlap between consecutive chunks of one section, in `chunk_unit`."""

    chunk_unit: ChunkUnit = ChunkUnit.CHARS
    """Whether sizes count characters or tokens (of the embedding model's tokenizer; a token
    counts at most 16 characters, so words it cannot split still count by their length)."""

    contextual_headers: bool = False
    """Whether a new index embeds each chunk with its document's title and heading path in
    front (the stored text stays the chunk alone); fixed per index once created
    (BENCHMARKS.md, "Contextual headers")."""

    # --- embedding defaults (per index overridable) -----------------------------------
    embedding_provider: str = "local"
    """The name of a registered embedding provider: `local` (offline model shipped in a
    wheel), `openai` (any OpenAI-compatible API), or one added with `register_provider`;
    checked when the embedder is built."""

    embedding_model: str = "all-MiniLM-L6-v2"
    """Model name passed to the provider."""

    embedding_dimensions: int | None = None
    """Vector size; None means the model's native size."""

    embedding_max_batch: int = Field(default=2048, gt=0)
    """Most inputs in one embedding request (OpenAI allows 2,048)."""

    embedding_max_batch_tokens: int = Field(default=300_000, gt=0)
    """Most tokens in one embedding request (OpenAI allows 300,000)."""

    embedding_concurrency: int = Field(default=4, gt=0)
    """Embedding requests in flight at once, per job."""

    indexing_window_chunks: int = Field(default=1024, gt=0)
    """Most chunks of one document embedded and written at once: with the few batches the
    parsing child sends ahead, all a worker holds of a document, however long (on the embedded
    store, a document of up to `live_write_chunks` is held whole)."""

    live_write_chunks: int = Field(default=8192, ge=0)
    """Embedded store: a document of at most this many chunks is held (vectors included) and
    written once, live, when it ends, rather than staged window by window and then published,
    which makes the store build the HNSW index of its chunks twice (BENCHMARKS.md, "Sustained
    ingestion"); that one write pauses the process for its length. 0: always staged."""

    embedding_timeout_seconds: float = Field(default=60.0, gt=0)
    """Timeout of one embedding request."""

    embedding_max_attempts: int = Field(default=6, gt=0)
    """Attempts per batch (first try included) before `embedding_failed`."""

    embedding_deadline_seconds: float = Field(default=600.0, gt=0)
    """Total time one batch may spend retrying before `embedding_failed`."""

    embedding_backoff_base_seconds: float = Field(default=1.0, gt=0)
    """First backoff delay; it doubles per attempt (with jitter) up to `backoff_max`."""

    embedding_backoff_max_seconds: float = Field(default=60.0, gt=0)
    """Longest single backoff delay (a longer Retry-After is still honoured)."""

    embedding_requests_per_minute: int = Field(default=0, ge=0)
    """Requests per minute per provider credential, shared by every worker; 0 = no limit."""

    embedding_tokens_per_minute: int = Field(default=0, ge=0)
    """Tokens per minute per provider credential, shared by every worker; 0 = no limit."""

    openai_base_url: str | None = None
    """OpenAI-compatible endpoint; None lets the `openai` client read `OPENAI_BASE_URL`."""

    openai_api_key: SecretStr | None = None
    """API key; None lets the `openai` client read `OPENAI_API_KEY`."""

    openai_fallback_urls: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Comma-separated base URLs serving the same model as the primary, tried in order when
    its retries are spent or its circuit is open; each is checked to answer for the index's
    model with its dimensions before use, and refused if it does not."""

    openai_fallback_api_keys: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    """Comma-separated keys of the fallbacks, in their order; a missing or empty one means
    the primary's key."""

    embedding_circuit_failures: int = Field(default=5, gt=0)
    """Failed attempts in a row after which an endpoint with a fallback behind it is left
    alone (its circuit opens) for `embedding_circuit_open_seconds`."""

    embedding_circuit_open_seconds: float = Field(default=30.0, gt=0)
    """How long an open circuit sends batches past its endpoint before one probes it."""

    embedding_price_per_million_tokens: dict[str, float] = Field(default_factory=dict)
    """Price of a million input tokens by model name, as JSON (`{"text-embedding-3-small":
    0.02}`); adds `estimated_cost` to job and index usage, in the prices' currency."""

    local_model_threads: int = Field(default=0, ge=0)
    """CPU threads for the local model; 0 means one per core."""

    local_model_batch_tokens: int = Field(default=512, gt=0)
    """Padded tokens (inputs × the longest input) per run of the local model; bounds the
    memory one batch takes (at the default, 16 inputs up to 32 tokens, 1 beyond 256)."""

    query_cache_size: int = Field(default=1024, ge=0)
    """Query embeddings kept in memory (LRU); 0 disables the cache."""

    # --- jobs and workers ---------------------------------------------------------------
    redis_key_prefix: str = "docingest:"
    """Prefix of every Redis key, so several deployments can share one Redis."""

    job_ttl_days: float = Field(default=7.0, gt=0)
    """How long a finished job is kept (a failed or cancelled job's staged upload for
    `staging_failed_ttl_hours` of it)."""

    staging_quota_bytes: int = Field(default=10 * 1024**3, gt=0)
    """Most bytes the staging directory may hold (uploads waiting for or kept after their
    job); an upload that would pass it is refused with 507 `staging_full` while it streams."""

    staging_min_free_bytes: int = Field(default=1024**3, ge=0)
    """Free space an upload must leave on the staging directory's disk, whatever the quota;
    below it uploads are refused with 507 `staging_full`."""

    staging_failed_ttl_hours: float = Field(default=24.0, gt=0)
    """How long a failed or cancelled job's staged upload is kept for `retry` (the job itself
    is kept for `job_ttl_days`; retrying it after this answers 409). The sweep deletes it."""

    job_max_attempts: int = Field(default=3, gt=0)
    """Attempts per job (a worker lost mid-job or a transient error each cost one)."""

    job_retry_base_seconds: float = Field(default=5.0, gt=0)
    """First delay before a job that hit a transient error runs again; doubles per attempt."""

    job_retry_max_seconds: float = Field(default=300.0, gt=0)
    """Longest delay before such a job runs again (a longer Retry-After is still honoured)."""

    job_store_wait_seconds: float = Field(default=600.0, ge=0)
    """How long a job waits, queued and without spending attempts, for a store server that
    does not answer (down at start, restarting); then its attempts run as usual. 0: no wait."""

    heartbeat_interval_seconds: float = Field(default=5.0, gt=0)
    """How often a worker records that it is still working on a job."""

    heartbeat_timeout_seconds: float = Field(default=60.0, gt=0)
    """Silence after which a processing job is re-queued (or failed with `timeout`)."""

    lost_message_after_seconds: float = Field(default=300.0, gt=0)
    """A queued job found in no broker queue after waiting this long is sent again (so is a
    never-claimed one whose message was delivered this long ago and is still unacknowledged)."""

    housekeeping_interval_seconds: float = Field(default=15.0, gt=0)
    """How often some worker sweeps for jobs whose worker stopped."""

    task_soft_time_limit_seconds: int = Field(default=3600, gt=0)
    """Time one job may run before it is stopped and fails with `timeout`."""

    task_time_limit_seconds: int = Field(default=3660, gt=0)
    """Hard limit: a job still running after it is killed with its pool process."""

    broker_visibility_timeout_seconds: int = Field(default=7200, gt=0)
    """Redis broker: an unacknowledged task is redelivered after this; above the hard limit."""

    worker_concurrency: int = Field(default=2, gt=0)
    """Jobs one worker runs at once (threads in `serve` and in local mode)."""

    # --- HTTP ---------------------------------------------------------------------------
    host: str = "127.0.0.1"
    """Address `docingest serve`, `docingest api` and a worker's metrics port listen on."""

    port: int = Field(default=8000, gt=0, lt=65536)
    """Port `docingest serve` and `docingest api` listen on."""

    api_keys: list[ApiKey] = Field(default_factory=list)
    """API keys as JSON, e.g. `[{"key": "s3cret", "indexes": ["legal"]}, {"sha256": "..."}]`;
    empty means no key is needed. `indexes` omitted or null allows every index."""

    mcp_allow_paths: list[Path] = Field(default_factory=list)
    """Folders whose files the `ingest` tool of `docingest mcp` may read (JSON); none if empty."""

    mcp_allow_urls: list[str] = Field(default_factory=list)
    """URL prefixes that tool may fetch (JSON, e.g. `["https://docs.example.com/"]`); none if
    empty."""

    mcp_allow_private: bool = False
    """Let those URLs resolve to loopback, private or link-local addresses (refused if off)."""

    # --- operations ---------------------------------------------------------------------
    log_format: Literal["text", "json"] = "text"
    """`json` writes one JSON object per log line; lines logged while a job runs carry its
    `job_id`, `index` and `document_id`."""

    metrics_max_indexes: int = Field(default=20, ge=0)
    """Indexes named in the per-index usage metrics, most tokens first; the rest are summed
    under `index="(other)"`, so the label's values stay bounded."""

    metrics_port: int | None = Field(default=None, gt=0, lt=65536)
    """Port on which `docingest worker` serves Prometheus metrics of all its pool processes;
    None serves none. With the prefork pool it needs `PROMETHEUS_MULTIPROC_DIR` (an existing,
    writable directory) so that every pool process records into it. The API serves `/metrics`
    on its own port."""

    @field_validator("openai_fallback_urls", "openai_fallback_api_keys", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        """`a,b` or a JSON list `["a", "b"]`; empty means none."""
        if isinstance(value, str):
            if value.strip().startswith("["):
                return json.loads(value)
            return [item.strip() for item in value.split(",")] if value.strip() else []
        return value

    @model_validator(mode="after")
    def _check_fallbacks(self) -> Settings:
        if any(not url for url in self.openai_fallback_urls):
            raise ValueError("openai_fallback_urls has an empty entry")
        if len(self.openai_fallback_api_keys) > len(self.openai_fallback_urls):
            raise ValueError("openai_fallback_api_keys has more keys than there are fallbacks")
        return self

    def price_per_million_tokens(self, model: str) -> float | None:
        """The configured price of `model`'s input tokens, if any."""
        return self.embedding_price_per_million_tokens.get(model)

    @model_validator(mode="after")
    def _check_overlap(self) -> Settings:
        check_chunk_overlap(self.chunk_size, self.chunk_overlap)
        return self

    @model_validator(mode="after")
    def _check_time_limits(self) -> Settings:
        # A task outliving the visibility timeout is delivered twice (celery#5935).
        if not (
            self.task_soft_time_limit_seconds
            < self.task_time_limit_seconds
            < self.broker_visibility_timeout_seconds
        ):
            raise ValueError(
                "need task_soft_time_limit_seconds < task_time_limit_seconds < "
                "broker_visibility_timeout_seconds"
            )
        if self.heartbeat_timeout_seconds <= 2 * self.heartbeat_interval_seconds:
            raise ValueError("heartbeat_timeout_seconds must exceed two heartbeat intervals")
        return self

    @property
    def mbox_message_limit(self) -> int:
        """The messages an mbox may hold: `max_mbox_messages`, within `max_chunks_per_document`
        (a message is at least one chunk, so the archive would fail on chunks past it, late)."""
        return min(self.max_mbox_messages, self.max_chunks_per_document)

    @property
    def job_ttl_seconds(self) -> int:
        return int(self.job_ttl_days * 86400)

    @property
    def staging_dir(self) -> Path:
        """Where uploads wait for their job."""
        return self.data_dir / "staging"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Return the process-wide settings, read from the environment once."""
    return Settings()
