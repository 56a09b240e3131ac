"""The vector store: one Qdrant collection (server), shard (embedded) or table (PostgreSQL)
per index.

An index's settings are stored with it, so every process reads the same ones. A chunk is one
point with a dense vector ("dense", cosine) and a keyword vector ("keyword", sparse, Qdrant's
IDF modifier), written "staged" and made "live" when its whole version is stored; searches see
live points only. Documents are derived from the points (the chunk_index 0 point of a
document's highest live version carries its fields), never from a second database. Listing
them reads those points alone, in `document_id` order a page at a time
(`docingest.pipeline.store.ordering`): O(documents listed), not O(index).

This is the store's logic, once; `docingest.pipeline.store.engine` is the seam to the engines.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from qdrant_client import models

from docingest.pipeline import metrics
from docingest.pipeline.errors import DocumentNotFound, IndexConflict, IndexNotFound
from docingest.pipeline.settings import Settings
from docingest.pipeline.store.access import ADMIN, Reader, restrict
from docingest.pipeline.store.candidates import CandidateQueries
from docingest.pipeline.store.documents import DocumentPage, DocumentRecords, PayloadIndexes
from docingest.pipeline.store.engine import Engine, open_engine
from docingest.pipeline.store.filters import SearchFilter, metadata_path
from docingest.pipeline.store.models import (
    DOCUMENT_PAYLOAD_KEYS,
    ChunkRecord,
    IndexConfig,
    IndexInfo,
    StoredDocument,
    stored_document,
    validate_index_name,
)
from docingest.pipeline.store.point_reads import PointReads
from docingest.pipeline.store.readers import ReaderFilters
from docingest.pipeline.store.requests import (
    CORE_INDEXES,
    Point,
    equals,
    fields_filter,
    metadata_index_schema,
    point_of,
    to_qdrant,
)
from docingest.pipeline.store.schema import (
    PAYLOAD_INDEX,
    FieldType,
    merge_schemas,
    validate_metadata,
)

__all__ = ["VectorStore"]

WRITE_BATCH = 256


class VectorStore(CandidateQueries, PointReads, ReaderFilters):
    """All index, point, document and search-candidate operations; safe to share by threads."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._indexed_keys: dict[str, set[str] | None] = {}
        self._payload_indexes = PayloadIndexes(engine)
        self._records = DocumentRecords(engine, self._payload_indexes)

    @classmethod
    def open(cls, settings: Settings) -> VectorStore:
        """Open the embedded store under `data_dir`, or connect to `database_url` or `qdrant_url`.

        The embedded store raises `StoreLocked` when another process holds the directory.
        """
        return cls(open_engine(settings))

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def ping(self) -> None:
        """Raise `DependencyUnavailable` unless Qdrant answers."""
        self.engine.ping()

    # --- indexes ------------------------------------------------------------------------

    def create_index(self, name: str, config: IndexConfig) -> tuple[IndexInfo, bool]:
        """Create `name` with `config`; return (info, created). Other settings → IndexConflict."""
        validate_index_name(name)
        if config.embedding.dimensions is None:
            raise ValueError("resolve embedding.dimensions before creating an index")
        with self.engine.locked():
            existing = self.index_config(name)
            if existing is None:
                try:
                    self.engine.create_index(name, config)
                    self._forget(name)
                    self._index_declared_fields(name, config.metadata_schema or {})
                    return self._info(name, config), True
                except Exception as exc:  # lost a race with another process, or a failure
                    existing = self.index_config(name)
                    if existing is None:
                        if self.engine.index_exists(name):
                            raise IndexConflict(
                                f"A Qdrant collection for index '{name}' exists but was not "
                                "made by docingest; choose another index name or collection "
                                "prefix."
                            ) from exc
                        raise
            if existing.conflicts_with(config):
                raise IndexConflict(existing.conflict_message(name, config))
            schema = merge_schemas(name, existing.metadata_schema, config.metadata_schema)
            if schema != existing.metadata_schema:
                had = existing.metadata_schema or {}
                added = {k: v for k, v in (schema or {}).items() if k not in had}
                existing = existing.model_copy(update={"metadata_schema": schema})
                self.engine.replace_config(name, existing)
                self._index_declared_fields(name, added)
            if (existing.rerank, existing.access) != (config.rerank, config.access):
                # both may change at any time; an access change applies to the next read
                update = {"rerank": config.rerank, "access": config.access}
                existing = existing.model_copy(update=update)
                self.engine.replace_config(name, existing)
            return self._info(name, existing), False

    def _index_declared_fields(self, index: str, schema: Mapping[str, FieldType]) -> None:
        """Give each declared field the payload index of its type (where the engine keeps
        payload indexes; one inferred from an earlier value is replaced)."""
        known = self.engine.payload_indexes(index)
        if known is None:
            return
        for key, kind in schema.items():
            if (schema_type := PAYLOAD_INDEX[kind]) is not None:
                self.engine.create_payload_index(index, metadata_path(key), schema_type)
        self._indexed_keys.pop(index, None)

    def index_config(self, name: str) -> IndexConfig | None:
        """Return the settings stored with index `name`, or None if there is no such index."""
        try:
            return self.engine.index_config(validate_index_name(name))
        except IndexNotFound:
            return None

    def get_index(self, name: str, *, reader: Reader = ADMIN) -> IndexInfo | None:
        """The index with the counts of what `reader` may see."""
        config = self.index_config(name)
        if config is None:
            return None
        return self._info(name, config, visible=restrict(None, reader.visibility(config.access)))

    def list_indexes(self) -> list[IndexInfo]:
        infos = []
        for name in self.engine.list_indexes():
            try:
                info = self.get_index(name)
            except IndexNotFound:  # deleted meanwhile
                continue
            if info is not None:
                infos.append(info)
        return infos

    def delete_index(self, name: str) -> bool:
        """Delete index `name` and all its points; False if it did not exist."""
        validate_index_name(name)
        with self.engine.locked():
            self._forget(name)
            return self.engine.delete_index(name)

    def _forget(self, name: str) -> None:
        self._indexed_keys.pop(name, None)
        self._payload_indexes.forget(name)
        self._records.forget(name)

    def _info(
        self, name: str, config: IndexConfig, *, visible: SearchFilter | None = None
    ) -> IndexInfo:
        documents, chunks = self._records.count(name, search_filter=visible)
        return IndexInfo(
            name=name,
            embedding=config.embedding,
            chunking=config.chunking,
            description=config.description,
            contextual_headers=config.contextual_headers,
            documents=documents,
            chunks=chunks,
            created_at=config.created_at,
            metadata_schema=config.metadata_schema,
            rerank=config.rerank,
            access=config.access,
        )

    # --- points -------------------------------------------------------------------------

    def write_chunks(self, index: str, records: Sequence[ChunkRecord]) -> None:
        """Upsert `records` as staged points, in batches, each durable when written."""
        if not records:
            return
        self._check_records(index, records)
        for start in range(0, len(records), WRITE_BATCH):
            points = [point_of(index, record) for record in records[start : start + WRITE_BATCH]]
            self._write(index, points)

    @property
    def writes_live(self) -> bool:
        """Whether a small document is better written once, live (`write_live`), than staged
        and then published (`Engine.writes_live`; on Edge a publish copies every point a build
        has indexed meanwhile back for a second build: BENCHMARKS.md, "Sustained ingestion")."""
        return self.engine.writes_live

    def write_live(
        self, index: str, records: Sequence[ChunkRecord], *, content: Mapping[str, Any]
    ) -> None:
        """Upsert `records` as live points with `content` set (what `publish` would set), in
        one update: searches see all of them or none. Only where `writes_live`."""
        if not records:
            return
        self._check_records(index, records)
        self._write(index, [point_of(index, record, live=content) for record in records])

    def _check_records(self, index: str, records: Sequence[ChunkRecord]) -> None:
        """Refuse vectors of the wrong size and metadata off the index's schema; give new
        metadata keys their payload index."""
        config = self.index_config(index)
        if config is None:
            raise IndexNotFound(f"Index '{index}' does not exist.")
        dimensions = config.embedding.dimensions
        for record in records:
            if record.dense.shape != (dimensions,):
                raise ValueError(
                    f"vector of shape {record.dense.shape} for an index of {dimensions} dimensions"
                )
        declared = config.metadata_schema or {}
        for metadata in {id(r.document.metadata): r.document.metadata for r in records}.values():
            validate_metadata(metadata, declared)  # the API checked; a split API may not have
        self._index_metadata_keys(index, [record.document.metadata for record in records], declared)

    def _index_metadata_keys(
        self, index: str, metadatas: Sequence[Mapping[str, Any]], declared: Mapping[str, FieldType]
    ) -> None:
        """Give each undeclared user metadata key a payload index the first time it is
        written (declared ones got theirs with the schema), and an index made before a core
        index existed that one."""
        if index not in self._indexed_keys:
            known = self._indexed_keys[index] = self.engine.payload_indexes(index)
            for path, core_type in CORE_INDEXES.items():
                if known is not None and path not in known:
                    self.engine.create_payload_index(index, path, core_type)
                    known.add(path)
        known = self._indexed_keys[index]
        if known is None:  # the engine keeps no payload indexes
            return
        for metadata in metadatas:
            for key, value in metadata.items():
                path = metadata_path(key)
                if key in declared or path in known:
                    continue
                if (schema_type := metadata_index_schema(value)) is None:
                    continue
                self.engine.create_payload_index(index, path, schema_type)
                known.add(path)

    def _write(self, index: str, points: Sequence[Point]) -> None:
        """Upsert `points`, first giving the order keys of document records their index."""
        firsts = [point.payload for point in points if point.payload.get("chunk_index") == 0]
        self._payload_indexes.ensure_order_fields(index, firsts)
        self.engine.upsert(index, points)
        metrics.POINTS_UPSERTED.inc(len(points))

    def publish(
        self,
        index: str,
        document_id: str,
        version: int,
        *,
        content: Mapping[str, Any] | None = None,
    ) -> None:
        """Make every point of that version live, setting `content` on each in the same
        update (`DocumentFields.content_payload`: fields known only after the last chunk)."""
        selector = fields_filter(document_id=document_id, version=version)
        payload = {"state": "live", **(content or {})}
        self.engine.set_payload(validate_index_name(index), payload, selector)

    def retire(self, index: str, document_id: str, *, keep_version: int) -> int:
        """Delete the document's points of every version but `keep_version`; return how many."""
        selector = models.Filter(
            must=[equals("document_id", document_id)],
            must_not=[equals("version", keep_version)],
        )
        return self._delete(index, selector)

    def discard(self, index: str, document_id: str, version: int) -> None:
        """Delete the points of one version (a cancelled or stale attempt)."""
        self._delete(index, fields_filter(document_id=document_id, version=version))

    def _delete(self, index: str, selector: models.Filter) -> int:
        count = self.engine.count(validate_index_name(index), selector)
        if count:
            self.engine.delete(index, selector)
        return count

    def count_points(
        self,
        index: str,
        document_id: str | None = None,
        version: int | None = None,
        state: str | None = None,
    ) -> int:
        selector = fields_filter(document_id=document_id, version=version, state=state)
        return self.engine.count(validate_index_name(index), selector)

    def write_points(self, index: str, points: Sequence[Point]) -> None:
        """Write points as they are, state included (for import); records exported by a
        release before documents were ordered get their order keys at the next listing."""
        self._write(validate_index_name(index), points)
        self._records.forget(index)

    # --- documents ----------------------------------------------------------------------

    def _live_documents(
        self, index: str, document_id: str | None, *, within: SearchFilter | None = None
    ) -> dict[str, StoredDocument]:
        selector = fields_filter(document_id=document_id, state="live", chunk_index=0)
        if within is not None:
            selector = to_qdrant(within, must=[selector])
        latest: dict[str, StoredDocument] = {}
        for record in self._scroll(index, selector, payload=DOCUMENT_PAYLOAD_KEYS):
            document = stored_document(record.payload or {})
            current = latest.get(document.document_id)
            if current is None or document.version > current.version:
                latest[document.document_id] = document
        return latest

    def list_documents(
        self, index: str, *, filter: SearchFilter | None = None
    ) -> list[StoredDocument]:
        """Return each (matching) document's highest live version, ordered by document_id."""
        return list(self.iter_documents(index, filter=filter))

    def iter_documents(
        self, index: str, *, filter: SearchFilter | None = None, after: str | None = None
    ) -> Iterator[StoredDocument]:
        """Yield the (matching) documents after `after`, in document_id order, read a page
        at a time (`docingest.pipeline.store.ordering`)."""
        return self._records.iterate(validate_index_name(index), search_filter=filter, after=after)

    def matches_every_document(
        self, index: str, filter: SearchFilter, *, among: SearchFilter | None = None
    ) -> bool:
        """Whether `filter` matches every document the index holds (of those `among`
        matches, if given; True for none)."""
        return self._records.match_all(validate_index_name(index), filter, among=among)

    def document_page(
        self,
        index: str,
        *,
        limit: int,
        filter: SearchFilter | None = None,
        after: str | None = None,
    ) -> DocumentPage:
        """Return up to `limit` (1 to `MAX_PAGE`) documents after `after`, in document_id
        order, and the id the next page starts after (None at the end): O(limit) records."""
        return self._records.page(
            validate_index_name(index), limit=limit, search_filter=filter, after=after
        )

    def copy_version(
        self, index: str, document_id: str, *, source: int, target: int, changes: dict[str, Any]
    ) -> int:
        """Write every point of version `source` again as staged points of `target`, with
        `changes` on their payload and the same vectors; return how many. New metadata is
        checked against the index's declared schema and indexed as an upload's is."""
        config = self.index_config(index)
        declared = (config.metadata_schema or {}) if config is not None else {}
        metadata = changes.get("metadata")
        if isinstance(metadata, dict):
            validate_metadata(metadata, declared)
            self._index_metadata_keys(index, [metadata], declared)
        copied = 0
        for points in self._records.copy_version(
            validate_index_name(index), document_id, source=source, target=target, changes=changes
        ):
            self._write(index, points)
            copied += len(points)
        return copied

    def live_document(
        self, index: str, document_id: str, *, within: SearchFilter | None = None
    ) -> StoredDocument | None:
        """The document's highest live version, if it matches `within` (a `readable` or
        `writable` filter: a document hidden from the caller is as missing)."""
        return self._live_documents(index, document_id, within=within).get(document_id)

    def get_document(
        self, index: str, document_id: str, *, within: SearchFilter | None = None
    ) -> StoredDocument:
        """Return the document's highest live version, or raise `DocumentNotFound` (also
        when it does not match `within`: the same answer, hidden or missing)."""
        document = self.live_document(index, document_id, within=within)
        if document is None:
            raise DocumentNotFound(f"Document '{document_id}' is not in index '{index}'.")
        return document

    def delete_document(self, index: str, document_id: str) -> bool:
        """Delete every point of the document (all versions and states); False if none."""
        return self._delete(index, fields_filter(document_id=document_id)) > 0
