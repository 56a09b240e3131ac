"""`ingest_file`: one file into an index as a document, the sequence the facade and the job
runner share.

    ensure the index → open the prepared file (in the limited child) → stop if cancelled →
    the index's embedder → the document's next version → index it, window by window

The stages are timed here (`StageClock`), and the embedding usage metered
(`docingest.pipeline.embedders.usage`), whoever called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from docingest.pipeline.document import PageReporter
from docingest.pipeline.embedders.base import Embedder
from docingest.pipeline.embedders.usage import metering
from docingest.pipeline.errors import Cancelled
from docingest.pipeline.indexing import IndexHooks, IndexRequest, IndexResult, index_document
from docingest.pipeline.indexing.request import NO_HOOKS
from docingest.pipeline.ingest.stage_clock import StageClock
from docingest.pipeline.isolation.parent import open_prepared
from docingest.pipeline.keys import JobStage
from docingest.pipeline.prepare import PrepareRequest, StageReporter
from docingest.pipeline.redis_errors import map_redis_errors
from docingest.pipeline.services import Services
from docingest.pipeline.settings import Settings


@dataclass(frozen=True, slots=True)
class IngestRequest:
    """One file to store in `index` as `document_id`, replacing any older version."""

    path: Path
    index: str
    document_id: str
    filename: str
    """The name the file was uploaded under (its extension hints the format)."""
    content_type: str | None = None
    user_metadata: Mapping[str, Any] = field(default_factory=dict)
    force: bool = False
    """Re-embed every chunk and rewrite unchanged content."""
    access: list[str] | None = None
    """The document's access list; None keeps the stored version's (if any)."""


@dataclass(frozen=True, slots=True)
class IngestHooks:
    """How a caller follows and steers one `ingest_file`."""

    on_stage: StageReporter | None = None
    """Hears detecting, extracting and chunking as each begins."""
    on_page: PageReporter | None = None
    index: IndexHooks = NO_HOOKS
    """Progress, cancellation and steps of the indexing (its `on_busy` is the stage clock's)."""
    version: Callable[[], int] | None = None
    """Hands out the version to write, once the file is open (a job keeps the one its first
    attempt was given); default: the document's next version (`Services.next_version`)."""


NO_INGEST_HOOKS = IngestHooks()


def window_chunks(settings: Settings, embedder: Embedder) -> int:
    """How many chunks one window embeds and writes: the setting's cap, or as many as the
    embedder takes in one round of concurrent requests, if fewer (a small local model's
    batches would otherwise hold the first window back from being stored)."""
    return min(settings.indexing_window_chunks, embedder.max_batch * settings.embedding_concurrency)


def ingest_file(
    services: Services, request: IngestRequest, hooks: IngestHooks = NO_INGEST_HOOKS
) -> IndexResult:
    """Ingest `request.path` into its index (created with the defaults when missing).

    Unchanged content is not embedded again. Raises a `PermanentError` for a bad file, and
    `Cancelled` or `Superseded` when the job stops on purpose; the index is then as it was.
    """
    config = services.ensure_index(request.index)
    clock = StageClock()
    prepare = PrepareRequest(
        request.path,
        filename=request.filename,
        chunking=config.chunking,
        content_type=request.content_type,
        on_stage=_also(clock.enter, hooks.on_stage),
        on_page=_entering_extraction(clock, hooks.on_page),
        should_cancel=hooks.index.should_cancel,
    )
    index_hooks = replace(
        hooks.index, on_progress=_timed(clock, hooks.index.on_progress), on_busy=clock.busy
    )
    with open_prepared(prepare, settings=services.settings) as prepared:  # streams the chunks
        if hooks.index.should_cancel():
            raise Cancelled()
        embedder = services.embedder_for(config.embedding)
        version = hooks.version or (
            lambda: services.next_version(request.index, request.document_id)
        )
        index_request = IndexRequest(
            prepared,
            index=request.index,
            document_id=request.document_id,
            version=version(),
            user_metadata=dict(request.user_metadata),
            force=request.force,
            access=request.access,
        )
        # the fence's Redis calls, which the store phase makes; the usage of this file alone
        with map_redis_errors(), metering() as meter:
            result = index_document(
                index_request,
                store=services.store,
                embedder=embedder,
                fence=services.fence,
                window=window_chunks(services.settings, embedder),
                live_write_chunks=services.settings.live_write_chunks,
                hooks=index_hooks,
            )
    clock.stop()
    price = services.settings.price_per_million_tokens(config.embedding.model)
    return replace(result, usage=meter.usage(price_per_million_tokens=price))


def _also(first: StageReporter, then: StageReporter | None) -> StageReporter:
    if then is None:
        return first

    def both(stage: JobStage) -> None:
        first(stage)
        then(stage)

    return both


def _entering_extraction(clock: StageClock, on_page: PageReporter | None) -> PageReporter:
    def page(done: int, total: int) -> None:
        clock.enter(JobStage.EXTRACTING)
        if on_page is not None:
            on_page(done, total)

    return page


def _timed(
    clock: StageClock, on_progress: Callable[[JobStage, int, int | None], None]
) -> Callable[[JobStage, int, int | None], None]:
    """`on_progress`, entering its stage once the total is known (before that the chunks
    are counted while the document is still being extracted)."""

    def progress(stage: JobStage, done: int, total: int | None) -> None:
        if total is not None:
            clock.enter(stage)
        on_progress(stage, done, total)

    return progress
