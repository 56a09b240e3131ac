"""`/metrics`: this process's metrics plus job counts read from Redis at scrape time.

Job counts and each index's usage come from Redis so every API replica reports the same
numbers whichever worker ran the jobs; stage durations, uploads and embedding calls (per
endpoint too) are counted per process.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from docingest.pipeline.embedders.base import COUNTERS
from docingest.pipeline.errors import DependencyUnavailable
from docingest.pipeline.ingest.staging import staging_usage
from docingest.pipeline.jobs.usage import OTHER
from docingest.pipeline.keys import JobStatus
from docingest.pipeline.services import Services


class JobsCollector(Collector):
    """Jobs by status, queue depth and the oldest queued job's age, from Redis."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        up = GaugeMetricFamily("docingest_redis_up", "1 if Redis answered this scrape.")
        try:
            counts = self._services.jobs.counts()
            oldest = self._services.jobs.oldest_queued_age()
        except DependencyUnavailable:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        active = GaugeMetricFamily(
            "docingest_jobs", "Jobs queued or processing now.", labels=["status"]
        )
        for status in (JobStatus.QUEUED, JobStatus.PROCESSING):
            active.add_metric([status.value], counts[status.value])
        yield active
        finished = CounterMetricFamily(
            "docingest_jobs_finished", "Jobs finished, by terminal status.", labels=["status"]
        )
        for status in (status for status in JobStatus if status.terminal):
            finished.add_metric([status.value], counts[status.value])
        yield finished
        yield GaugeMetricFamily(
            "docingest_queue_depth", "Jobs waiting for a worker.", value=counts["queued"]
        )
        yield GaugeMetricFamily(
            "docingest_oldest_queued_seconds",
            "How long the longest-waiting queued job has waited.",
            value=oldest,
        )


class IndexUsageCollector(Collector):
    """Each index's cumulative usage, from Redis: the `metrics_max_indexes` indexes that used
    the most tokens by name, the rest summed as `index="(other)"`, so the label's values are
    bounded whatever the number of indexes (an index can move between the two as usage
    grows; sum over `index` for a total that never does)."""

    FIELDS = (
        ("jobs", "docingest_index_jobs_completed", "Completed jobs counted in the index's usage."),
        ("embedding_requests", "docingest_index_embedding_requests",
         "Embedding requests of the index's completed jobs."),
        ("input_tokens", "docingest_index_embedding_tokens",
         "Input tokens of the index's completed jobs (the provider's count when it gives one)."),
        ("vectors_reused", "docingest_index_vectors_reused",
         "Chunks of the index's completed jobs that needed no embedding request."),
        ("fallback_requests", "docingest_index_fallback_requests",
         "Embedding requests of the index's completed jobs that a fallback endpoint served."),
    )  # fmt: skip

    def __init__(self, services: Services) -> None:
        self._services = services

    def collect(self) -> Iterator[CounterMetricFamily]:
        limit = self._services.settings.metrics_max_indexes
        try:
            named, other = self._services.usage.top(limit)
        except DependencyUnavailable:
            return  # docingest_redis_up says so
        rows = [*named.items(), (OTHER, other)]
        for field, name, documentation in self.FIELDS:
            family = CounterMetricFamily(name, documentation, labels=["index"])
            for index, usage in rows:
                family.add_metric([index], getattr(usage, field))
            yield family


class StagingCollector(Collector):
    """The staging directory's files and bytes against its quota, read at scrape time."""

    def __init__(self, services: Services) -> None:
        self._settings = services.settings

    def collect(self) -> Iterator[GaugeMetricFamily]:
        settings = self._settings
        usage = staging_usage(settings.staging_dir)
        yield GaugeMetricFamily(
            "docingest_staging_bytes", "Bytes of staged uploads on disk.", value=usage.bytes
        )
        yield GaugeMetricFamily(
            "docingest_staging_files", "Staged uploads on disk.", value=usage.files
        )
        yield GaugeMetricFamily(
            "docingest_staging_quota_bytes",
            "Most bytes the staging directory may hold; uploads past it get 507.",
            value=settings.staging_quota_bytes,
        )
        yield GaugeMetricFamily(
            "docingest_staging_failed_ttl_seconds",
            "How long a failed or cancelled job's staged upload is kept for retry.",
            value=settings.staging_failed_ttl_hours * 3600,
        )


class EmbeddingCollector(Collector):
    """Embedding requests, retries, failures, inputs and tokens of this process."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        for name, value in COUNTERS.snapshot().items():
            yield CounterMetricFamily(
                f"docingest_embedding_{name}", f"Embedding {name} in this process.", value=value
            )


class WebhooksCollector(Collector):
    """The webhook outbox's counts, from Redis: every process reports the same numbers, whichever
    dispatcher sent the deliveries (attempt and latency histograms are per process,
    `docingest.pipeline.metrics`)."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        try:
            stats = self._services.outbox.stats()
        except DependencyUnavailable:
            return  # docingest_redis_up says so
        yield GaugeMetricFamily(
            "docingest_webhook_deliveries_pending",
            "Webhook deliveries not yet delivered nor given up (waiting, leased or retrying).",
            value=stats["pending"],
        )
        finished = CounterMetricFamily(
            "docingest_webhook_deliveries",
            "Webhook deliveries ended: delivered, failed (given up after the retry period) or "
            "dropped (their webhook was removed).",
            labels=["status"],
        )
        for status in ("delivered", "failed", "dropped"):
            finished.add_metric([status], stats[status])
        yield finished
        yield CounterMetricFamily(
            "docingest_webhook_retries",
            "Failed webhook delivery attempts that were scheduled again.",
            value=stats["retried"],
        )


def registry_for(services: Services) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobsCollector(services))
    registry.register(StagingCollector(services))
    registry.register(EmbeddingCollector())
    registry.register(IndexUsageCollector(services))
    registry.register(WebhooksCollector(services))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """The process-wide metrics followed by this app's."""
    return generate_latest(REGISTRY) + generate_latest(registry)
