"""Prometheus metrics recorded by the stages in this process.

The API serves them at `/metrics`; `docingest worker` on its metrics port, summed over its pool
processes (prometheus-client multiprocess mode, `docingest/worker_metrics.py`).

Counts that must agree across processes (jobs queued, processing and finished, and each
index's usage) are read from Redis at scrape time instead (`docingest/api/metrics.py`); these are
per-process histograms and totals. The `endpoint` label takes one value per configured
embedding endpoint (`primary`, `fallback1`, ...) or `local`, so it stays small.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)

JOBS_FINISHED = Counter(
    "docingest_worker_jobs_finished",
    "Jobs this process finished, by outcome and error code.",
    ["status", "code"],
)
JOB_SECONDS = Histogram(
    "docingest_job_duration_seconds",
    "Time from claim to completion of the jobs this process completed.",
    buckets=_DURATION_BUCKETS,
)
STAGE_SECONDS = Histogram(
    "docingest_stage_duration_seconds",
    "Time jobs spent in each pipeline stage.",
    ["stage"],
    buckets=_DURATION_BUCKETS,
)
UPLOAD_BYTES = Counter("docingest_upload_bytes", "Bytes of uploads accepted by this process.")
UPLOADS = Counter("docingest_uploads", "Uploads accepted by this process.")
POINTS_UPSERTED = Counter(
    "docingest_points_upserted", "Points (chunks) this process wrote to Qdrant, acknowledged."
)
EMBEDDING_REQUEST_SECONDS = Histogram(
    "docingest_embedding_request_duration_seconds",
    "Time of one embedding request (one local-model batch, or one provider call).",
    ["provider"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
STORE_OPTIMIZE_SECONDS = Histogram(
    "docingest_store_optimize_duration_seconds",
    "Time of one optimization run of an embedded (Edge) shard; the process pauses meanwhile.",
    buckets=_DURATION_BUCKETS,
)
STORE_GRAPH_BUILDS = Gauge(
    "docingest_store_graph_builds_running",
    "PostgreSQL store: HNSW graphs of sealed generations this process is building now.",
)
STORE_POOL_WAIT_SECONDS = Histogram(
    "docingest_store_pool_wait_seconds",
    "PostgreSQL store: time to take a connection from this process's pool (its check too).",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30),
)
STORE_FLUSH_SECONDS = Histogram(
    "docingest_store_flush_duration_seconds",
    "Time of one flush of an embedded (Edge) shard (segments persisted, WAL truncated).",
    buckets=_DURATION_BUCKETS,
)
EMBEDDING_ENDPOINT_REQUESTS = Counter(
    "docingest_embedding_endpoint_requests",
    "Embedding requests each endpoint (primary, fallback1, ...) answered with vectors.",
    ["endpoint"],
)
EMBEDDING_ENDPOINT_TOKENS = Counter(
    "docingest_embedding_endpoint_tokens",
    "Input tokens of the requests each endpoint served (the provider's count when it gives one).",
    ["endpoint"],
)
EMBEDDING_ENDPOINT_FAILURES = Counter(
    "docingest_embedding_endpoint_failures",
    "Failed attempts (retryable errors) at each embedding endpoint.",
    ["endpoint"],
)
EMBEDDING_FAILOVERS = Counter(
    "docingest_embedding_failovers",
    "Batches an endpoint gave up on (retries spent or circuit open), taken by the next one.",
    ["endpoint"],
)
EMBEDDING_CIRCUIT_OPENED = Counter(
    "docingest_embedding_circuit_opened",
    "Times an embedding endpoint's circuit breaker opened (or a half-open probe failed).",
    ["endpoint"],
)
WEBHOOK_ATTEMPTS = Counter(
    "docingest_webhook_attempts",
    "Webhook delivery attempts this process made, by outcome (delivered, retry, failed).",
    ["outcome"],
)
WEBHOOK_SECONDS = Histogram(
    "docingest_webhook_attempt_duration_seconds",
    "Time of one webhook delivery attempt, from resolving the host to the answer.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
WEBHOOK_DELIVERY_SECONDS = Histogram(
    "docingest_webhook_delivery_latency_seconds",
    "Time from an event to its delivery (retries included), for deliveries this process made.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 21600, 86400),
)
RERANK_REQUESTS = Counter(
    "docingest_rerank_requests",
    "Searches this process sent to a re-ranker, by provider, endpoint and outcome (`ok` or the "
    "`rerank_error` code).",
    ["provider", "endpoint", "outcome"],
)
RERANK_SECONDS = Histogram(
    "docingest_rerank_duration_seconds",
    "Time one search spent in its re-ranker, retries included.",
    ["provider"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
SOURCE_RUNS = Counter(
    "docingest_source_runs",
    "Source runs this process ended, by index, source and status (completed, failed).",
    ["index", "source", "status"],
)
SOURCE_ITEMS = Counter(
    "docingest_source_items",
    "Items this process's source runs compared, by index, source and outcome (new, changed, "
    "unchanged, deleted, failed).",
    ["index", "source", "outcome"],
)
SOURCE_RUN_SECONDS = Histogram(
    "docingest_source_run_duration_seconds",
    "Time from start to end of the source runs this process ended.",
    ["index", "source"],
    buckets=_DURATION_BUCKETS,
)
