"""Prometheus metrics recorded by the stages in this process.

The API serves them at `/metrics`; `docingest worker` on its metrics port, summed over its pool
processes (prometheus-client multiprocess mode, `docingest/worker_metrics.py`).

Counts that must agree across processes (jobs queued, processing and finished) are read from
Redis at scrape time instead (`api/metrics.py`); these are per-process histograms and totals.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

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
STORE_FLUSH_SECONDS = Histogram(
    "docingest_store_flush_duration_seconds",
    "Time of one flush of an embedded (Edge) shard (segments persisted, WAL truncated).",
    buckets=_DURATION_BUCKETS,
)
