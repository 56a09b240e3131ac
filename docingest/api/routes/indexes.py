"""`/v1/indexes`: create (idempotent), list, show and delete indexes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from docingest.api.deps import AuthorizedIndex, CallerDep, ReaderDep, ServicesDep
from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.embedders.base import EmbeddingConfig
from docingest.pipeline.errors import IndexNotFound
from docingest.pipeline.jobs.usage import IndexUsage
from docingest.pipeline.rerank import RerankConfig, reranker_factory
from docingest.pipeline.services import Services
from docingest.pipeline.sources.store import source_store
from docingest.pipeline.store import IndexConfig, IndexInfo, Reader
from docingest.pipeline.store.access import AccessMode
from docingest.pipeline.store.schema import MetadataSchema, check_schema

router = APIRouter(prefix="/v1/indexes", tags=["indexes"])


class IndexCreate(BaseModel):
    """Settings of a new index; each part defaults to the server's settings."""

    model_config = ConfigDict(extra="forbid")

    embedding: EmbeddingConfig | None = None
    chunking: ChunkingSpec | None = None
    description: str | None = Field(default=None, max_length=1000)
    metadata_schema: MetadataSchema | None = None
    """Declared user metadata fields and their types (`docingest.pipeline.store.schema`)."""

    @field_validator("metadata_schema", mode="before")
    @classmethod
    def _schema(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return check_schema(value)  # the field named in the message, not pydantic's
        return value

    contextual_headers: bool | None = None
    """Embed each chunk with its document's title and heading path in front; fixed once
    the index exists (a different value is 409, as for the embedding)."""

    rerank: RerankConfig | None = None
    """The index's default second stage; may change with another PUT (left out: kept)."""

    access: AccessMode | None = None
    """Who sees a document without an access list: every caller ("open", the default) or
    admins only ("restricted"); may change with another PUT (left out: kept)."""


class IndexDetail(IndexInfo):
    """An index with its cumulative usage (docs/guides/usage-and-fallback.md)."""

    usage: IndexUsage


class IndexList(BaseModel):
    indexes: list[IndexDetail]


def _visible_info(services: Services, name: str, reader: Reader) -> IndexInfo | None:
    try:
        return services.store.get_index(name, reader=reader)
    except IndexNotFound:  # deleted meanwhile
        return None


def _detail(services: Services, info: IndexInfo, usage: IndexUsage) -> IndexDetail:
    price = services.settings.price_per_million_tokens(info.embedding.model)
    return IndexDetail(**info.model_dump(), usage=usage.priced(price))


@router.put("/{index}", response_model=IndexInfo, status_code=201)
def create_index(
    index: AuthorizedIndex,
    services: ServicesDep,
    caller: CallerDep,
    response: Response,
    body: IndexCreate | None = None,
) -> IndexInfo:
    """Create `index` (201), or confirm it exists with the same settings (200); else 409, or
    422 for an embedding its provider cannot build (an unknown provider, a local model that
    is not bundled, dimensions the model cannot produce) or an unknown rerank provider. A
    `metadata_schema` on an existing index adds its new fields (200); changing a declared
    field's type is 409. An existing index takes a `rerank` sent (null clears it)."""
    body = body or IndexCreate()
    if body.rerank is not None and body.rerank.provider is not None:
        reranker_factory(body.rerank.provider)  # InvalidRerank (422) for an unknown name
    defaults = services.default_index_config()
    embedding = services.resolve_embedding(body.embedding) if body.embedding else None
    rerank, access = body.rerank, body.access
    existing = services.store.index_config(index)
    if "rerank" not in body.model_fields_set and existing is not None:
        rerank = existing.rerank
    if access is None:
        access = existing.access if existing is not None else "open"
    if existing is not None and (rerank, access) != (existing.rerank, existing.access):
        caller.check_admin("Changing an index's rerank or access")
    config = IndexConfig(
        embedding=embedding or defaults.embedding,
        chunking=body.chunking or defaults.chunking,
        description=body.description,
        metadata_schema=body.metadata_schema or None,
        rerank=rerank,
        access=access,
        contextual_headers=(
            defaults.contextual_headers
            if body.contextual_headers is None
            else body.contextual_headers
        ),
    )
    info, created = services.store.create_index(index, config)
    response.status_code = 201 if created else 200
    return info


@router.get("", response_model=IndexList)
def list_indexes(services: ServicesDep, caller: CallerDep, reader: ReaderDep) -> IndexList:
    """Every index this caller may use, with its usage (counts of what it may see)."""
    store = services.store
    infos = [
        info
        for name in store.engine.list_indexes()
        if caller.may_use(name) and (info := _visible_info(services, name, reader)) is not None
    ]
    usage = services.usage.of_many(info.name for info in infos)
    return IndexList(indexes=[_detail(services, info, usage[info.name]) for info in infos])


@router.get("/{index}", response_model=IndexDetail)
def get_index(index: AuthorizedIndex, services: ServicesDep, reader: ReaderDep) -> IndexDetail:
    info = services.store.get_index(index, reader=reader)
    if info is None:
        raise IndexNotFound(f"Index '{index}' does not exist.")
    return _detail(services, info, services.usage.of(index))


@router.delete("/{index}", status_code=204)
def delete_index(index: AuthorizedIndex, services: ServicesDep, caller: CallerDep) -> Response:
    """Remove the index, all its vectors and its usage (an admin's: it removes documents
    other callers may not see). Its sources stay, and their next runs bring everything back."""
    caller.check_admin("Deleting an index")
    if not services.delete_index(index):
        raise IndexNotFound(f"Index '{index}' does not exist.")
    # After the delete, not before: a run comparing items in between finds them unchanged,
    # and its next run, fingerprints gone, brings them.
    source_store(services).forget_fingerprints(index)
    return Response(status_code=204)
