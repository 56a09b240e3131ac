"""Whether a caller may see a job: as it may see the job's document.

Jobs live in Redis, not in the store, so this is the one check made outside a store query.
A job that gave its document an access list is judged by that list (its document may not
be stored yet); one that gave none keeps the stored version's list, so it is judged by the
stored document (read through the store's own visibility filter), or by the index's rule
for a document without a list when none is stored. A hidden job answers as a missing one.
"""

from __future__ import annotations

from collections.abc import Iterable

from docingest.pipeline.errors import IndexNotFound
from docingest.pipeline.jobs.job import Job
from docingest.pipeline.store import Reader, VectorStore


def job_visible(store: VectorStore, job: Job, reader: Reader) -> bool:
    """Whether `reader` may see `job` (always, for an admin)."""
    if reader.is_admin:
        return True
    config = store.index_config(job.index)
    if config is None:  # the index is gone, and its documents with it
        return reader.sees(job.access, "open") if job.access is not None else False
    if job.access is not None:
        return reader.sees(job.access, config.access)
    try:
        if store.live_document(job.index, job.document_id) is None:
            return config.access == "open"
        visible = store.readable(job.index, reader)
        return store.live_document(job.index, job.document_id, within=visible) is not None
    except IndexNotFound:
        return False


def visible_jobs(store: VectorStore, jobs: Iterable[Job], reader: Reader) -> list[Job]:
    """The jobs of `jobs` that `reader` may see, in order (one check per document)."""
    if reader.is_admin:
        return list(jobs)
    seen: dict[tuple[str, str, str | None], bool] = {}
    kept = []
    for job in jobs:
        key = (job.index, job.document_id, None if job.access is None else repr(job.access))
        if key not in seen:
            seen[key] = job_visible(store, job, reader)
        if seen[key]:
            kept.append(job)
    return kept
