"""Every Redis key, queue name and job state name docingest uses, in one place.

    {prefix}job:{job_id}              hash: one job (`docingest.pipeline.jobs.state`); expires `ttl`
                                      after it finishes
    {prefix}jobs                      zset: every job id, scored by creation time
    {prefix}jobs:index:{index}        zset: the job ids of one index, scored by creation time
    {prefix}jobs:queued               zset: queued job ids, scored by when they were queued
    {prefix}jobs:running              zset: processing job ids, scored by their last heartbeat
    {prefix}jobs:finished             hash: jobs finished per terminal status (counters)
    {prefix}version:{index}:{doc}     string: newest version handed out
                                      (`docingest.pipeline.store.fencing`)
    {prefix}lock:{index}:{doc}        lock: a document's store phase
                                      (`docingest.pipeline.store.fencing`)
    {prefix}usage:index:{index}       hash: an index's cumulative usage, added to when each
                                      of its jobs completes (`docingest.pipeline.jobs.usage`)
    {prefix}usage:ranking             zset: index names by input tokens (per-index metrics)
    {prefix}usage:all                 hash: the usage of every index together
    {prefix}housekeeping:tick         string with a TTL: who runs the next sweep
    {prefix}webhooks:index:{index}    hash: an index's webhook subscriptions, name → JSON
                                      (`docingest.pipeline.outbox`)
    {prefix}webhooks:delivery:{id}    hash: one delivery of the outbox; expires once it ends
    {prefix}webhooks:chain:{target}:{index}:{doc}
                                      list: a document's pending deliveries to one target
                                      (`w:{name}` or `c:{sha1 of a callback URL}`), in order;
                                      only the head is ever due
    {prefix}webhooks:due              zset: chain heads, scored by when they are next due (a
                                      claim moves the score past its lease)
    {prefix}webhooks:log:{index}:{name}
                                      list: a webhook's recent delivery ids, newest first
    {prefix}webhooks:stats            hash: deliveries pending, delivered, retried, failed
    {prefix}webhooks:deleting         hash: deletes under way, JSON [index, doc] → JSON
                                      {"version", "at"}; its `document.deleted` event is
                                      written when the delete ends (`docingest.pipeline.outbox`)
    {prefix}sources:index:{index}     hash: an index's sources, name → JSON (secrets in clear,
                                      never shown; `docingest.pipeline.sources.store`)
    {prefix}sources:due               zset: JSON [index, name] of sources due, scored by when
    {prefix}source:lease:{index}:{name}
                                      string with a TTL: the token of the process running it
    {prefix}source:runs:{index}:{name}
                                      hash: run id → Run JSON (`source:runorder:...`: the
                                      run ids, scored by when each began)
    {prefix}source:items:{index}:{name}
                                      hash: item id → fingerprint JSON of what it brought
    {prefix}source:seen:{index}:{name}
                                      set: the item ids the current run has compared (its
                                      checkpoint); `...:jobs` hash: job id → item id
    {prefix}celery:...                the Celery broker's keys (kombu's global key prefix;
                                      `docingest.workers.broker` reads its queue lists)
    docingest:ratelimit:{scope}:log   zset: the embedding rate limiter's reservations
    docingest:ratelimit:{scope}:tokens
                                      string: the sum of their tokens
                                      (`docingest.pipeline.embedders.ratelimit`, `RateLimitKeys`):
                                      one prefix for all deployments, since a provider's limit
                                      belongs to its credential, not to a deployment; `{scope}`
                                      is a Redis Cluster hash tag, so both keys share a slot

Index names cannot contain ":", so a document id after one may contain anything.

The Celery queue and task names live here too, so the API (which sends) and the workers
(which register and route) cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

DEFAULT_PREFIX = "docingest:"
RATE_LIMIT_PREFIX = "docingest:ratelimit:"
"""Prefix of the rate limiter's keys, shared by every deployment (see the module docstring)."""

INGEST_QUEUE = "docingest.ingest"
"""Celery queue of ingestion tasks."""
HOUSEKEEPING_QUEUE = "docingest.housekeeping"
"""Celery queue of the periodic sweep, so it never waits behind a backlog of uploads."""
INGEST_TASK = "docingest.ingest"
"""Celery task that runs one ingestion job (`docingest.workers.tasks`)."""
HOUSEKEEPING_TASK = "docingest.housekeeping"
"""Celery task that runs one sweep (`docingest.workers.tasks`)."""


class JobStatus(StrEnum):
    QUEUED = "queued"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """Whether a job in this status is finished for good (until someone retries it)."""
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES: frozenset[JobStatus] = frozenset(
    {JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED}
)
"""The statuses a job ends in. Members are `str`s, so `"failed" in TERMINAL_STATUSES` holds."""


class JobStage(StrEnum):
    """What a processing job is doing, in pipeline order."""

    DETECTING = "detecting"
    EXTRACTING = "extracting"
    CHUNKING = "chunking"
    EMBEDDING = "embedding"
    STORING = "storing"


@dataclass(frozen=True, slots=True)
class Keys:
    """The Redis keys of one deployment (one `prefix`)."""

    prefix: str = DEFAULT_PREFIX

    def job(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}"

    @property
    def jobs(self) -> str:
        return f"{self.prefix}jobs"

    def index_jobs(self, index: str) -> str:
        return f"{self.prefix}jobs:index:{index}"

    @property
    def queued(self) -> str:
        return f"{self.prefix}jobs:queued"

    @property
    def running(self) -> str:
        return f"{self.prefix}jobs:running"

    @property
    def finished(self) -> str:
        return f"{self.prefix}jobs:finished"

    def index_usage(self, index: str) -> str:
        """An index's cumulative usage, counted once per completed job."""
        return f"{self.prefix}usage:index:{index}"

    @property
    def usage_ranking(self) -> str:
        """Index names scored by the input tokens their jobs used."""
        return f"{self.prefix}usage:ranking"

    @property
    def usage_all(self) -> str:
        """The usage of every index together (what the per-index metrics' `(other)` is
        the rest of)."""
        return f"{self.prefix}usage:all"

    @property
    def housekeeping_tick(self) -> str:
        return f"{self.prefix}housekeeping:tick"

    # The outbox's keys are also built inside the job scripts (the index, the document and
    # the target are read there), from these prefixes: `docingest.pipeline.outbox.scripts`.

    @property
    def webhooks_prefix(self) -> str:
        """Prefix of an index's subscriptions hash (`webhooks(index)`)."""
        return f"{self.prefix}webhooks:index:"

    def webhooks(self, index: str) -> str:
        """An index's webhook subscriptions: name → JSON."""
        return f"{self.webhooks_prefix}{index}"

    @property
    def webhook_delivery_prefix(self) -> str:
        return f"{self.prefix}webhooks:delivery:"

    def webhook_delivery(self, delivery_id: str) -> str:
        return f"{self.webhook_delivery_prefix}{delivery_id}"

    @property
    def webhook_chain_prefix(self) -> str:
        """Prefix of the per-document, per-target delivery lists."""
        return f"{self.prefix}webhooks:chain:"

    @property
    def webhook_log_prefix(self) -> str:
        return f"{self.prefix}webhooks:log:"

    def webhook_log(self, index: str, name: str) -> str:
        """A webhook's recent delivery ids, newest first."""
        return f"{self.webhook_log_prefix}{index}:{name}"

    @property
    def webhooks_due(self) -> str:
        return f"{self.prefix}webhooks:due"

    @property
    def webhook_stats(self) -> str:
        return f"{self.prefix}webhooks:stats"

    @property
    def webhooks_deleting(self) -> str:
        return f"{self.prefix}webhooks:deleting"

    def sources(self, index: str) -> str:
        """An index's sources: name → JSON."""
        return f"{self.prefix}sources:index:{index}"

    @property
    def sources_due(self) -> str:
        return f"{self.prefix}sources:due"

    def source_key(self, kind: str, index: str, name: str) -> str:
        """One of a source's own keys: `lease`, `runs`, `runorder`, `items`, `seen`,
        `jobs` (neither index nor source names hold ":")."""
        return f"{self.prefix}source:{kind}:{index}:{name}"

    @property
    def broker_prefix(self) -> str:
        """Prefix of every key of the Celery broker, so deployments can share one Redis."""
        return f"{self.prefix}celery:"

    def document_version(self, index: str, document_id: str) -> str:
        """The counter of the newest version handed out for a document (fencing)."""
        return f"{self.prefix}version:{index}:{document_id}"

    def document_lock(self, index: str, document_id: str) -> str:
        """The lock held while a document's versions are written, published and retired."""
        return f"{self.prefix}lock:{index}:{document_id}"


@dataclass(frozen=True, slots=True)
class RateLimitKeys:
    """The two keys of one rate-limit scope (a provider credential)."""

    prefix: str = RATE_LIMIT_PREFIX

    def log(self, scope: str) -> str:
        return f"{self.prefix}{{{scope}}}:log"

    def tokens(self, scope: str) -> str:
        return f"{self.prefix}{{{scope}}}:tokens"
