"""What a client does to stored documents besides uploading them: list them a page at a time,
replace their metadata or access list, and delete those a filter matches, each kept to what
the caller's `Reader` may see and change (`docingest.pipeline.store.access`).

A PATCH (of the metadata, the access list or both) publishes a new version, as a re-upload
does, instead of changing payloads in place: Qdrant sets a payload on many points one segment
at a time, so a search running meanwhile could see some chunks with the old metadata (or
access list) and some with the new. The new version's points are the live version's, copied
with their vectors (nothing parsed or embedded again) and the new fields, written staged,
then published and the old version retired, under the document's store lock. A search keeps
one version of each document (`docingest.pipeline.search.candidates`), so it sees the old
fields or the new, never both (BENCHMARKS.md, "Metadata PATCH").
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

from docingest.pipeline.cursors import decode_cursor, encode_cursor
from docingest.pipeline.errors import (
    DocumentIngesting,
    DocumentNotFound,
    Forbidden,
    InvalidFilter,
    InvalidMetadata,
    JobNotFound,
)
from docingest.pipeline.metadata import validate_user_metadata
from docingest.pipeline.store import ADMIN, Reader, StoredDocument
from docingest.pipeline.store.access import access_payload, validate_access
from docingest.pipeline.store.fencing import KEEP_ALIVE_TIMEOUT
from docingest.pipeline.store.filters import SearchFilter
from docingest.pipeline.store.schema import validate_metadata

if TYPE_CHECKING:
    from docingest.pipeline.services import Services
    from docingest.pipeline.store import VectorStore

MAX_DELETE = 1000
"""The most documents one delete-by-filter request removes; `more` says whether others match.
Each is a whole single delete (a lock, a version, a store delete, and its webhook event), so
a request stays a bounded synchronous answer instead of a job; a larger clean-up repeats it."""
PATCH_LOCK_WAIT_SECONDS = 30.0
"""How long a PATCH waits for another holder of the document's store lock (an upload being
stored, a delete, another PATCH) before answering `document_busy`."""
LISTING = "documents"
"""The listing kind its cursors are bound to (`docingest.pipeline.cursors`)."""


# --- listing ------------------------------------------------------------------------------


def list_documents_page(
    store: VectorStore,
    index: str,
    *,
    limit: int,
    filter: SearchFilter | None = None,
    cursor: str | None = None,
    reader: Reader = ADMIN,
) -> tuple[list[StoredDocument], str | None]:
    """A page of the index's documents in `document_id` order, and the cursor of the next
    page (None after the last); `InvalidCursor` for a cursor not made by this listing.

    The cursor holds the last document's id, so documents inserted or deleted meanwhile
    neither repeat nor skip the others."""
    after = None if cursor is None else decode_cursor(cursor, kind=LISTING, index=index)
    visible = store.readable(index, reader, filter)
    page = store.document_page(index, limit=limit, filter=visible, after=after)
    following = None
    if page.next_after is not None:
        following = encode_cursor(page.next_after, kind=LISTING, index=index)
    return page.documents, following


# --- metadata and access ------------------------------------------------------------------

_UNCHANGED: Any = object()
"""A PATCH field left out."""


def patch_metadata(
    services: Services, index: str, document_id: str, raw_metadata: Any
) -> StoredDocument:
    """Replace the user metadata of the document's live version (`patch_document`)."""
    return patch_document(services, index, document_id, metadata=raw_metadata)


def patch_document(
    services: Services,
    index: str,
    document_id: str,
    *,
    metadata: Any = _UNCHANGED,
    access: Any = _UNCHANGED,
    reader: Reader = ADMIN,
) -> StoredDocument:
    """Replace the user metadata, the access list or both of the document's live version on
    all its chunks at once (`access` None removes the list).

    `DocumentNotFound` without a live version (or one `reader` may not see); `Forbidden` for
    one it sees but may not change; `DocumentIngesting` (409) while a newer upload of it is
    being ingested, since publishing that upload would silently drop this change;
    `DocumentBusy` (503) if another holder keeps the store lock past `PATCH_LOCK_WAIT_SECONDS`.
    """
    changes: dict[str, Any] = {}
    if metadata is _UNCHANGED and access is _UNCHANGED:
        raise InvalidMetadata(
            'Send {"metadata": {...}}, {"access": [...]} or both; {"metadata": {}} removes the '
            'metadata, {"access": null} the access list.'
        )
    if metadata is not _UNCHANGED:
        changes["metadata"] = _checked_metadata(services, index, metadata)
    if access is not _UNCHANGED:
        changes["access"] = access_payload(validate_access(access))
    store, fence = services.store, services.fence
    with fence.lock(
        index,
        document_id,
        timeout=KEEP_ALIVE_TIMEOUT,
        blocking_timeout=PATCH_LOCK_WAIT_SECONDS,
        keep_alive=True,
    ):
        services.check_writable(index, document_id, reader)
        live = store.live_document(index, document_id)
        if live is None:
            raise DocumentNotFound(f"Document '{document_id}' is not in index '{index}'.")
        seen = fence.current_version(index, document_id)
        if _being_ingested(services, index, live):
            raise DocumentIngesting(_ingesting_message(document_id))
        # Only if no upload took a version since `seen`: one that did must not be superseded.
        version = fence.next_version_if(index, document_id, seen=seen, floor=live.version)
        if version is None:
            raise DocumentIngesting(_ingesting_message(document_id))
        store.copy_version(
            index,
            document_id,
            source=live.version,
            target=version,
            changes=changes,
        )
        store.publish(index, document_id, version)
        store.retire(index, document_id, keep_version=version)
        update: dict[str, Any] = {"version": version, **changes}
        if "access" in changes:
            update["access"] = validate_access(access)
        return live.model_copy(update=update)


def _checked_metadata(services: Services, index: str, raw_metadata: Any) -> dict[str, Any]:
    """The PATCH's metadata, checked as an upload's (the index's declared `metadata_schema`
    too), before any lock or version."""
    if not isinstance(raw_metadata, dict):  # None too: clearing takes an explicit {}
        raise InvalidMetadata(
            'Send the new metadata as a JSON object, such as {"metadata": {"department": '
            '"legal"}}; {} removes it all.'
        )
    metadata = validate_user_metadata(raw_metadata, max_bytes=services.settings.max_metadata_bytes)
    config = services.store.index_config(index)
    validate_metadata(metadata, config.metadata_schema if config is not None else None)
    return metadata


def _being_ingested(services: Services, index: str, live: StoredDocument) -> bool:
    """Whether a running job is storing (or will take) a newer version of `live`'s document,
    which would replace this PATCH's metadata with its own. A version handed out to an
    attempt that failed or was cancelled does not count; an upload still queued replaces
    the document when it runs, as any later upload does. Running jobs are as many as the
    workers' slots, so this reads a handful of job records."""
    for job_id in services.jobs.running():
        try:
            work = services.jobs.work(job_id)
        except JobNotFound:  # finished and expired meanwhile
            continue
        job = work.job
        if (job.index, job.document_id) != (index, live.document_id):
            continue
        if work.version is None or work.version > live.version:
            return True
    return False


def _ingesting_message(document_id: str) -> str:
    return (
        f"A newer upload of document {document_id!r} is being ingested and would replace this "
        "metadata; wait for its job to finish and send the PATCH again (or send the metadata "
        "with the upload)."
    )


# --- delete by filter ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Deleted:
    deleted: int
    more: bool
    """Whether more documents match (the request stopped at its limit)."""


def delete_matching(
    services: Services,
    index: str,
    search_filter: SearchFilter | None,
    *,
    limit: int,
    reader: Reader = ADMIN,
) -> Deleted:
    """Delete up to `limit` documents the filter matches, each as a single delete does
    (`Services.delete_document`: superseding a job still storing it).

    None deletes every document: the only way to, since a filter that matches every document
    the index holds is refused (`InvalidFilter`) however it is written (`{"document_id":
    {"exists": true}}`, a `$not` of what nothing holds, an `ne` no document has), so a mistyped
    filter cannot empty an index. What it matches is read at the request; a document added
    while the others are deleted is not protected. For a `reader` that is not an admin, the
    filter (or all=true) reaches only the documents it may delete, and the "every document"
    refusal is judged among those, so it tells nothing of the others."""
    if not 1 <= limit <= MAX_DELETE:
        raise ValueError(f"limit must be 1 to {MAX_DELETE}")
    store = services.store
    mine = store.writable(index, reader)
    wanted = store.writable(index, reader, search_filter)
    listed = store.iter_documents(index, filter=wanted)
    matching = [document.document_id for document in islice(listed, limit + 1)]
    if (
        search_filter is not None
        and matching
        and wanted is not None
        and store.matches_every_document(index, wanted, among=mine)
    ):
        raise InvalidFilter(
            f"The filter matches every document of index '{index}'; to delete them all, send "
            "all=true without a filter (or DELETE the index). A filter that leaves some "
            "document out deletes without it."
        )
    deleted = 0
    for document_id in matching[:limit]:
        try:
            services.delete_document(index, document_id, reader=reader)
        except (DocumentNotFound, Forbidden):  # deleted or changed meanwhile by someone else
            continue
        deleted += 1
    return Deleted(deleted=deleted, more=len(matching) > limit)
