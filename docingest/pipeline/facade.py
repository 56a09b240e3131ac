"""`Pipeline`: the whole pipeline in one process, without the service or its queue.

What the worker does for an upload (prepare in a limited child, embed, store as a new version
of the document, retire the old one) and what the API does for a search, behind a few calls.
Redis must answer at `settings.redis_url`: it hands out the document versions that make
re-ingesting safe. The store is the embedded Qdrant Edge store in `settings.data_dir`, or the
Qdrant server at `settings.qdrant_url`; the embedded store allows one process per directory, so
do not run this beside a `docingest serve` on the same data directory.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

from docingest.pipeline.indexing import IndexResult
from docingest.pipeline.ingest.file import IngestRequest, ingest_file
from docingest.pipeline.search import SearchRequest, SearchResponse
from docingest.pipeline.services import Services
from docingest.pipeline.settings import Settings, get_settings
from docingest.pipeline.store import ADMIN
from docingest.pipeline.store.access import validate_access


class Pipeline:
    """Ingest files into indexes and search them; thread-safe; close it (or use `with`)."""

    def __init__(self, settings: Settings | None = None) -> None:
        self._services = Services(settings or get_settings(), owns_store=True)

    @property
    def settings(self) -> Settings:
        return self._services.settings

    def ingest(
        self,
        index: str,
        path: str | Path,
        *,
        document_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        force: bool = False,
        access: list[str] | None = None,
    ) -> IndexResult:
        """Ingest the file at `path` into `index` (created with the settings' defaults when
        missing) as `document_id` (default: the file's name), replacing any older version.

        Unchanged content is not embedded again. Raises a `PermanentError` for a bad file.
        `access`: its access list (None keeps the stored version's, if any).
        """
        path = Path(path)
        request = IngestRequest(
            path,
            index=index,
            document_id=document_id or path.name,
            filename=path.name,
            user_metadata=metadata or {},
            force=force,
            access=validate_access(access),
        )
        return ingest_file(self._services, request)

    def delete(self, index: str, document_id: str) -> None:
        """Delete every version of `document_id` from `index`; an ingest of it still under way
        is superseded and drops its work. Raises `DocumentNotFound` if it is not there."""
        self._services.delete_document(index, document_id)

    def search(self, index: str, query: str, **options: Any) -> SearchResponse:
        """Search `index` for `query`; `options` are `SearchRequest`'s (`top_k`, `mode`,
        `filter`, `max_chunks_per_document`, `score_threshold`). Scores: higher is better."""
        return self._services.search(index, SearchRequest(query=query, **options), reader=ADMIN)

    def close(self) -> None:
        """Release the store (and its lock on the data directory) and the Redis connections."""
        self._services.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def open_pipeline(settings: Settings | None = None) -> Pipeline:
    """Open the pipeline with `settings` (default: from the `DOCINGEST_*` environment)."""
    return Pipeline(settings)
