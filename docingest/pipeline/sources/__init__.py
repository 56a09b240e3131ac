"""Sources: an index kept in sync with an S3 bucket, a website or a server folder, on a
schedule, incrementally, with deletions (docs/reference/http-api.md, "Sources")."""

from docingest.pipeline.sources.base import Fetched, Found, Item, ItemFailed, SourceType
from docingest.pipeline.sources.registry import register_source_type, source_type, source_types
from docingest.pipeline.sources.runner import (
    CANCELLED_EVENT,
    COMPLETED_EVENT,
    FAILED_EVENT,
    SourceRunner,
)
from docingest.pipeline.sources.spec import (
    Run,
    RunCounts,
    Schedule,
    StoredSource,
    check_name,
    public_config,
)
from docingest.pipeline.sources.store import SourceStore, source_store

__all__ = [
    "CANCELLED_EVENT",
    "COMPLETED_EVENT",
    "FAILED_EVENT",
    "Fetched",
    "Found",
    "Item",
    "ItemFailed",
    "Run",
    "RunCounts",
    "Schedule",
    "SourceRunner",
    "SourceStore",
    "SourceType",
    "StoredSource",
    "check_name",
    "public_config",
    "register_source_type",
    "source_store",
    "source_type",
    "source_types",
]
