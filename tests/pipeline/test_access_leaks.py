"""The leak suite, in the pipeline on both engines: random documents with random access lists,
random readers and both index rules, and every read path of the store compared with a
reference computed here, independently of `docingest.pipeline.store.access`.

Paths: search in each mode (with `top_k` filled by visible results only), with context
expansion, excerpts and rerank candidates; the documents listing (whole and paged); the
index's counts; GET document; a document's chunks; who may change or delete (PATCH, DELETE,
delete by filter). A hidden document answers as a missing one, message and all.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docingest.pipeline.documents import delete_matching, list_documents_page, patch_document
from docingest.pipeline.errors import DocumentNotFound, Forbidden
from docingest.pipeline.search import SearchRequest
from docingest.pipeline.search.request import Expand
from docingest.pipeline.services import Services
from docingest.pipeline.store import ADMIN, Reader
from docingest.pipeline.store.chunk_pages import document_chunks
from tests.pipeline.store.test_store import records
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.engines import ENGINES, engine_fields
from tests.support.redis_db import TestRedis
from tests.support.rerank_server import FakeRerankServer
from tests.support.services import services_factory

UNIVERSE = ["public", "user:ana", "user:bo", "group:legal", "group:hr", "user:o'b\"r,x"]
"""The principals documents and readers draw from (one with quotes and a comma)."""
GRANTABLE = UNIVERSE[1:]
_names = itertools.count()

access_lists = st.one_of(st.none(), st.lists(st.sampled_from(UNIVERSE), max_size=3, unique=True))
documents = st.lists(
    st.tuples(access_lists, st.integers(min_value=1, max_value=3)), min_size=1, max_size=7
)
readers = st.one_of(
    st.none(),  # an admin
    st.lists(st.sampled_from(GRANTABLE), max_size=3, unique=True),
)


def may_read(access: list[str] | None, mode: str, held: list[str] | None) -> bool:
    """The reference rule (the contract's words): admins see all; a listed document is seen by
    holders of one of its principals, everyone holding `public`; an unlisted one by all in an
    open index and by admins only in a restricted one."""
    if held is None:
        return True
    if access is None:
        return mode == "open"
    return bool(set(access) & ({"public"} | set(held)))


def may_write(access: list[str] | None, mode: str, held: list[str] | None) -> bool:
    """Writing takes a principal of the caller's own on the list (`public` grants reading
    only), or an admin, or an unlisted document of an open index."""
    if held is None:
        return True
    if access is None:
        return mode == "open"
    return bool(set(access) & set(held))


@pytest.fixture(params=ENGINES)
def services(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    embedding_server: FakeEmbeddingServer,
    redis_db: TestRedis,
) -> Iterator[Services]:
    with services_factory(tmp_path, redis_db.prefix, embedding_server) as make:
        yield make(**engine_fields(request.param, tmp_path))


def make_index(services: Services, mode: str) -> str:
    index = f"leaks{next(_names)}"
    config = services.ensure_index(index)
    services.store.create_index(index, config.model_copy(update={"access": mode}))
    return index


def store_document(
    services: Services, index: str, document_id: str, chunks: int, access: list[str] | None
) -> None:
    """Store a published version as an ingest does, with `access` on every chunk."""
    config = services.store.index_config(index)
    assert config is not None and config.embedding.dimensions
    version = services.next_version(index, document_id)
    texts = [f"harbour report {document_id} part {n} of the quay" for n in range(chunks)]
    rng = np.random.default_rng(version + len(document_id))
    written = []
    for record in records(document_id, version, texts):
        vector = rng.normal(size=config.embedding.dimensions).astype(np.float32)
        fields = dataclasses.replace(record.document, access=access)
        written.append(
            dataclasses.replace(record, dense=vector / np.linalg.norm(vector), document=fields)
        )
    services.store.write_chunks(index, written)
    services.store.publish(index, document_id, version)


def reader_of(held: list[str] | None) -> Reader:
    return ADMIN if held is None else Reader.of(held)


def missing_message(index: str, document_id: str) -> str:
    return f"Document '{document_id}' is not in index '{index}'."


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(docs=documents, mode=st.sampled_from(["open", "restricted"]), held=readers)
def test_every_read_path_answers_only_what_the_reader_may_see(
    services: Services, docs: list[tuple[list[str] | None, int]], mode: str, held: list[str] | None
) -> None:
    index = make_index(services, mode)
    try:
        _check_paths(services, index, docs, mode, held)
    finally:
        services.store.delete_index(index)


def _check_paths(
    services: Services,
    index: str,
    docs: list[tuple[list[str] | None, int]],
    mode: str,
    held: list[str] | None,
) -> None:
    store, reader = services.store, reader_of(held)
    chunks_of: dict[str, int] = {}
    access_of: dict[str, list[str] | None] = {}
    for number, (access, chunks) in enumerate(docs):
        document_id = f"doc-{number}"
        store_document(services, index, document_id, chunks, access)
        chunks_of[document_id], access_of[document_id] = chunks, access
    visible = sorted(d for d in chunks_of if may_read(access_of[d], mode, held))
    visible_chunks = {(d, n) for d in visible for n in range(chunks_of[d])}

    # search, every mode: exactly the visible chunks when top_k holds them all ...
    for search_mode in ("vector", "keyword", "hybrid"):
        request = SearchRequest(query="harbour quay report", top_k=50, mode=search_mode)
        found = services.search(index, request, reader=reader).results
        assert {(r.document_id, r.chunk_index) for r in found} == visible_chunks, search_mode
        # ... and a top_k smaller than that filled with visible ones, no gap
        small = SearchRequest(query="harbour quay report", top_k=2, mode=search_mode)
        few = services.search(index, small, reader=reader).results
        assert len(few) == min(2, len(visible_chunks))
        assert {(r.document_id, r.chunk_index) for r in few} <= visible_chunks
    # context expansion reads neighbours of visible hits only, of the hit's own document
    expand = SearchRequest(query="harbour", top_k=50, mode="vector", expand=Expand(neighbors=2))
    for result in services.search(index, expand, reader=reader).results:
        assert result.document_id in visible
        assert result.context is not None
        assert set(result.context.chunk_indexes) <= set(range(chunks_of[result.document_id]))
        assert result.excerpt is not None and result.excerpt.text in result.text
    # a filter naming `access` addresses user metadata, never the reserved field
    injected = SearchRequest(
        query="harbour", top_k=50, mode="vector", filter={"access": {"exists": False}}
    )
    found = services.search(index, injected, reader=reader).results
    assert {(r.document_id, r.chunk_index) for r in found} == visible_chunks

    # listings and counts
    readable = store.readable(index, reader)
    assert [d.document_id for d in store.list_documents(index, filter=readable)] == visible
    paged: list[str] = []
    cursor: str | None = None
    while True:
        page, cursor = list_documents_page(store, index, limit=2, cursor=cursor, reader=reader)
        paged.extend(document.document_id for document in page)
        if cursor is None:
            break
    assert paged == visible
    info = store.get_index(index, reader=reader)
    assert info is not None
    assert (info.documents, info.chunks) == (len(visible), len(visible_chunks))

    # one document: GET, its chunks, and who may change it; hidden answers as missing
    for document_id, access in access_of.items():
        within = store.readable(index, reader)
        if document_id in visible:
            shown = store.get_document(index, document_id, within=within)
            assert shown.access == (None if access is None else list(dict.fromkeys(access)))
            chunk_page = document_chunks(store, index, document_id, reader=reader)
            assert [c.chunk_index for c in chunk_page.chunks] == list(range(chunks_of[document_id]))
        else:
            _assert_hidden(services, index, document_id, reader)
            continue
        if may_write(access, mode, held):
            services.check_writable(index, document_id, reader)
        else:
            with pytest.raises(Forbidden):
                services.check_writable(index, document_id, reader)

    # delete by filter reaches only what the reader may delete
    deletable = {d for d in visible if may_write(access_of[d], mode, held)}
    outcome = delete_matching(services, index, None, limit=1000, reader=reader)
    assert outcome.deleted == len(deletable)
    left = {d.document_id for d in store.list_documents(index)}
    assert left == set(chunks_of) - deletable


def _assert_hidden(services: Services, index: str, document_id: str, reader: Reader) -> None:
    """Each single-document path answers as for a missing document, message and all."""
    store = services.store
    within = store.readable(index, reader)
    for read in (
        lambda: store.get_document(index, document_id, within=within),
        lambda: document_chunks(store, index, document_id, reader=reader),
        lambda: services.check_writable(index, document_id, reader),
        lambda: services.delete_document(index, document_id, reader=reader),
        lambda: patch_document(services, index, document_id, metadata={}, reader=reader),
    ):
        with pytest.raises(DocumentNotFound) as hidden:
            read()
        assert hidden.value.message == missing_message(index, document_id)
    assert store.live_document(index, document_id) is not None  # still there, untouched


def test_a_patch_of_the_access_list_changes_who_sees_at_once(services: Services) -> None:
    index = make_index(services, "open")
    store_document(services, index, "memo", 3, ["group:legal"])
    legal, hr = Reader.of(["group:legal"]), Reader.of(["group:hr"])
    request = SearchRequest(query="harbour", top_k=10, mode="hybrid")
    assert len(services.search(index, request, reader=legal).results) == 3
    assert services.search(index, request, reader=hr).results == []
    with pytest.raises(DocumentNotFound):  # hr may not even learn it exists
        patch_document(services, index, "memo", access=["group:hr"], reader=hr)
    document = patch_document(services, index, "memo", access=["group:hr"], reader=legal)
    assert document.access == ["group:hr"]
    assert services.search(index, request, reader=legal).results == []
    assert len(services.search(index, request, reader=hr).results) == 3
    # removing the list leaves the index's rule: open, so every reader sees it
    patch_document(services, index, "memo", access=None, reader=ADMIN)
    assert len(services.search(index, request, reader=legal).results) == 3
    assert store_access(services, index, "memo") is None


def store_access(services: Services, index: str, document_id: str) -> list[str] | None:
    return services.store.get_document(index, document_id).access


def test_an_empty_list_is_admins_only_even_in_an_open_index(services: Services) -> None:
    index = make_index(services, "open")
    store_document(services, index, "sealed", 2, [])
    store_document(services, index, "plain", 2, None)
    reader = Reader.of(["user:ana"])
    listed = services.store.list_documents(index, filter=services.store.readable(index, reader))
    assert [d.document_id for d in listed] == ["plain"]
    assert services.store.get_document(index, "sealed").access == []
    assert [d.document_id for d in services.store.list_documents(index)] == ["plain", "sealed"]


def test_the_index_rule_may_change_and_applies_to_the_next_read(services: Services) -> None:
    index = make_index(services, "open")
    store_document(services, index, "unlisted", 2, None)
    reader = Reader.of(["user:ana"])
    request = SearchRequest(query="harbour", top_k=10, mode="keyword")
    assert len(services.search(index, request, reader=reader).results) == 2
    config = services.store.index_config(index)
    assert config is not None
    services.store.create_index(index, config.model_copy(update={"access": "restricted"}))
    assert services.search(index, request, reader=reader).results == []
    assert len(services.search(index, request, reader=ADMIN).results) == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_a_re_ranker_is_never_sent_a_hidden_chunk(
    engine: str, tmp_path: Path, embedding_server: FakeEmbeddingServer, redis_db: TestRedis
) -> None:
    with (
        FakeRerankServer() as reranker,
        services_factory(tmp_path, redis_db.prefix, embedding_server) as make,
    ):
        services = make(
            **engine_fields(engine, tmp_path), rerank_url=reranker.url, rerank_provider="cohere"
        )
        index = make_index(services, "open")
        store_document(services, index, "shown", 3, ["group:legal"])
        store_document(services, index, "hidden", 3, ["group:board"])
        request = SearchRequest(query="harbour quay", top_k=10, rerank=True)
        response = services.search(index, request, reader=Reader.of(["group:legal"]))
        assert response.reranked and {r.document_id for r in response.results} == {"shown"}
        sent = [text for call in reranker.requests for text in call.body["documents"]]
        assert sent and all("shown" in text and "hidden" not in text for text in sent)
