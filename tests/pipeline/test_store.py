"""The Qdrant store in :memory: and local mode: indexes, points, documents, isolation, locking."""

from __future__ import annotations

import dataclasses
import hashlib
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pipeline.chunking import ChunkingSpec
from pipeline.embedders.base import EmbeddingConfig
from pipeline.errors import (
    DependencyUnavailable,
    DocumentNotFound,
    IndexConflict,
    IndexNotFound,
    InvalidFilter,
    InvalidIndexName,
    StoreLocked,
)
from pipeline.settings import ChunkUnit, Settings
from pipeline.sparse import encode_document, encode_query
from pipeline.store import (
    ChunkRecord,
    DocumentFields,
    IndexConfig,
    SearchFilter,
    VectorStore,
    point_id,
    validate_index_name,
)

REPO = Path(__file__).resolve().parents[2]
DIMS = 8
CONFIG = IndexConfig(
    embedding=EmbeddingConfig(provider="local", model="test-model", dimensions=DIMS)
)


def unit_vector(text: str) -> np.ndarray:
    """A deterministic unit vector per text (the store does not care where vectors come from)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    vector = np.random.default_rng(seed).normal(size=DIMS).astype(np.float32)
    return vector / np.linalg.norm(vector)


def records(
    document_id: str,
    version: int,
    texts: list[str],
    *,
    metadata: dict[str, object] | None = None,
    filename: str = "doc.txt",
) -> list[ChunkRecord]:
    fields = DocumentFields(
        filename=filename,
        format="text",
        content_sha256=hashlib.sha256(f"{document_id}{version}".encode()).hexdigest(),
        pages=None,
        words=sum(len(text.split()) for text in texts),
        chunk_count=len(texts),
        title=f"Title of {document_id}",
        author="A. Author",
        language="en",
        ingested_at="2025-01-01T00:00:00Z",
        metadata=dict(metadata or {}),
    )
    return [
        ChunkRecord(
            document_id=document_id,
            version=version,
            chunk_index=index,
            text=text,
            text_hash=hashlib.sha256(text.encode()).hexdigest(),
            start=index * 100,
            end=index * 100 + len(text),
            page_start=None,
            page_end=None,
            headings=["Section"],
            dense=unit_vector(text),
            sparse=encode_document(text),
            document=fields,
        )
        for index, text in enumerate(texts)
    ]


def store_settings(mode: str, tmp_path: Path) -> Settings:
    url = ":memory:" if mode == "memory" else None
    return Settings(qdrant_url=url, data_dir=tmp_path)


@pytest.fixture(params=["memory", "local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    vector_store = VectorStore.open(store_settings(request.param, tmp_path))
    yield vector_store
    vector_store.close()


def stored(
    store: VectorStore, index: str, document_id: str, version: int, texts: list[str]
) -> None:
    """Write one version of a document and make it live."""
    store.write_chunks(index, records(document_id, version, texts))
    store.publish(index, document_id, version)


# --- indexes ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "docs", "team-a_2", "x" * 64])
def test_valid_index_names(name: str) -> None:
    assert validate_index_name(name) == name


@pytest.mark.parametrize("name", ["", "Docs", "a b", "a/b", "ünï", "a.b", "x" * 65, "a\n"])
def test_invalid_index_names(name: str, store: VectorStore) -> None:
    with pytest.raises(InvalidIndexName) as raised:
        store.create_index(name, CONFIG)
    assert raised.value.code == "invalid_index_name"


def test_create_get_list_delete_index(store: VectorStore) -> None:
    assert store.get_index("docs") is None
    info, created = store.create_index("docs", CONFIG)
    assert created
    assert (info.name, info.embedding, info.documents, info.chunks) == (
        "docs",
        CONFIG.embedding,
        0,
        0,
    )

    again, created_again = store.create_index(
        "docs", CONFIG.model_copy(update={"description": "x"})
    )
    assert not created_again
    assert again.created_at == info.created_at

    store.create_index("other", CONFIG)
    stored(store, "docs", "d1", 1, ["one", "two", "three"])
    assert [i.name for i in store.list_indexes()] == ["docs", "other"]
    listed = store.get_index("docs")
    assert listed is not None and (listed.documents, listed.chunks) == (1, 3)

    assert store.delete_index("docs") is True
    assert store.delete_index("docs") is False
    assert store.get_index("docs") is None
    assert [i.name for i in store.list_indexes()] == ["other"]
    with pytest.raises(IndexNotFound):
        store.count_points("docs")


@pytest.mark.parametrize(
    "changed",
    [
        {"embedding": EmbeddingConfig(provider="local", model="test-model", dimensions=16)},
        {"embedding": EmbeddingConfig(provider="openai", model="test-model", dimensions=DIMS)},
        {"chunking": ChunkingSpec(chunk_size=500, chunk_overlap=50, unit=ChunkUnit.TOKENS)},
    ],
)
def test_changed_settings_conflict(store: VectorStore, changed: dict[str, object]) -> None:
    store.create_index("docs", CONFIG)
    stored(store, "docs", "d1", 1, ["text"])
    with pytest.raises(IndexConflict) as raised:
        store.create_index("docs", CONFIG.model_copy(update=changed))
    assert raised.value.code == "index_conflict"
    assert store.index_config("docs") == CONFIG  # unchanged, vectors still one space
    assert store.count_points("docs") == 1


def test_unresolved_dimensions_are_refused(store: VectorStore) -> None:
    with pytest.raises(ValueError, match="dimensions"):
        store.create_index("docs", IndexConfig(embedding=EmbeddingConfig()))


def test_foreign_collection_with_the_prefix(store: VectorStore) -> None:
    from qdrant_client import models  # only to plant a collection docingest did not make

    with store._connection.guard() as client:
        client.create_collection(
            "docingest_alien",
            vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE),
        )
    assert store.get_index("alien") is None
    assert store.list_indexes() == []
    with pytest.raises(IndexConflict, match="not made by docingest"):
        store.create_index("alien", CONFIG)


def test_config_is_persisted_for_the_next_process(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    config = IndexConfig(
        embedding=CONFIG.embedding,
        chunking=ChunkingSpec(chunk_size=300, chunk_overlap=30, unit=ChunkUnit.TOKENS),
        description="persisted",
    )
    with VectorStore.open(settings) as first:
        first.create_index("docs", config)
        stored(first, "docs", "d1", 1, ["alpha", "beta"])
    with VectorStore.open(settings) as second:
        assert second.index_config("docs") == config
        assert [d.document_id for d in second.list_documents("docs")] == ["d1"]
        _, created = second.create_index("docs", config)
        assert not created


def test_indexes_never_see_each_others_chunks(store: VectorStore) -> None:
    store.create_index("a", CONFIG)
    store.create_index("b", CONFIG)
    stored(store, "a", "shared-id", 1, ["apples grow on trees", "apple pie"])
    stored(store, "b", "shared-id", 1, ["bananas are yellow"])
    stored(store, "b", "only-b", 1, ["apples and bananas"])

    assert store.count_points("a") == 2 and store.count_points("b") == 2
    dense = store.query_dense("a", unit_vector("apples and bananas"), limit=10)
    keyword = store.query_sparse("a", encode_query("apples bananas"), limit=10)
    assert {hit.text for hit in dense + keyword} <= {"apples grow on trees", "apple pie"}
    assert [d.document_id for d in store.list_documents("a")] == ["shared-id"]
    store.delete_document("b", "shared-id")
    assert store.count_points("a") == 2


# --- points -----------------------------------------------------------------------------


def test_point_ids_are_deterministic() -> None:
    first = point_id("docs", "d1", 2, 5)
    assert first == point_id("docs", "d1", 2, 5)
    assert len({first, point_id("docs", "d1", 2, 6), point_id("docs", "d1", 3, 5)}) == 3
    assert point_id("a", "d1", 1, 0) != point_id("b", "d1", 1, 0)


def test_rewriting_the_same_records_does_not_duplicate(store: VectorStore) -> None:
    store.create_index("docs", CONFIG)
    batch = records("d1", 1, [f"chunk number {i}" for i in range(600)])  # > one write batch
    store.write_chunks("docs", batch)
    store.write_chunks("docs", batch)
    assert store.count_points("docs") == 600
    assert store.count_points("docs", state="staged") == 600


def test_write_refuses_wrong_dimensions_and_missing_index(store: VectorStore) -> None:
    store.create_index("docs", CONFIG)
    bad = records("d1", 1, ["text"])
    bad[0] = dataclasses.replace(bad[0], dense=np.ones(3, dtype=np.float32))
    with pytest.raises(ValueError, match="dimensions"):
        store.write_chunks("docs", bad)
    with pytest.raises(IndexNotFound):
        store.write_chunks("missing", records("d1", 1, ["text"]))
    assert store.count_points("docs") == 0


def test_publish_retire_discard(store: VectorStore) -> None:
    store.create_index("docs", CONFIG)
    store.write_chunks("docs", records("d1", 1, ["a", "b", "c"]))
    assert store.count_points("docs", state="live") == 0
    assert store.query_dense("docs", unit_vector("a"), limit=5) == []  # staged is invisible
    store.publish("docs", "d1", 1)
    assert store.count_points("docs", document_id="d1", version=1, state="live") == 3

    store.write_chunks("docs", records("d1", 2, ["a", "b2"]))
    store.write_chunks("docs", records("d1", 3, ["stale attempt"]))
    store.publish("docs", "d1", 2)
    assert store.count_points("docs", state="live") == 5  # both versions live for a moment
    store.discard("docs", "d1", 3)
    assert store.count_points("docs", version=3) == 0

    assert store.retire("docs", "d1", keep_version=2) == 3
    assert store.count_points("docs") == 2
    assert store.count_points("docs", document_id="d1", version=2, state="live") == 2
    assert store.retire("docs", "d1", keep_version=2) == 0


def test_stored_vectors_by_text_hash(store: VectorStore) -> None:
    store.create_index("docs", CONFIG)
    texts = ["first chunk", "second chunk", "third chunk"]
    store.write_chunks("docs", records("d1", 1, texts))
    store.write_chunks("docs", records("d1", 2, ["other text"]))
    vectors = store.stored_vectors("docs", "d1", 1)
    assert set(vectors) == {hashlib.sha256(t.encode()).hexdigest() for t in texts}
    for text in texts:
        got = vectors[hashlib.sha256(text.encode()).hexdigest()]
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, unit_vector(text), atol=1e-6)
    assert store.stored_vectors("docs", "d1", 9) == {}


# --- documents --------------------------------------------------------------------------


def test_documents_show_the_highest_live_version(store: VectorStore) -> None:
    store.create_index("docs", CONFIG)
    stored(store, "docs", "b-doc", 1, ["b one"])
    store.write_chunks("docs", records("a-doc", 1, ["v1 chunk", "v1 chunk 2"]))
    store.publish("docs", "a-doc", 1)
    store.write_chunks("docs", records("a-doc", 2, ["v2 chunk"], metadata={"dept": "legal"}))
    assert store.get_document("docs", "a-doc").version == 1  # v2 staged: not yet visible
    store.publish("docs", "a-doc", 2)
    store.write_chunks("docs", records("a-doc", 3, ["v3 staged"]))

    documents = store.list_documents("docs")
    assert [(d.document_id, d.version) for d in documents] == [("a-doc", 2), ("b-doc", 1)]
    document = store.get_document("docs", "a-doc")
    assert document == documents[0]
    assert (document.chunks, document.metadata, document.filename) == (
        1,
        {"dept": "legal"},
        "doc.txt",
    )
    assert (document.title, document.author, document.ingested_at) == (
        "Title of a-doc", "A. Author", "2025-01-01T00:00:00Z"
    )  # fmt: skip
    assert store.live_document("docs", "nope") is None
    with pytest.raises(DocumentNotFound) as raised:
        store.get_document("docs", "nope")
    assert raised.value.code == "document_not_found"


def test_delete_document_removes_every_point(store: VectorStore) -> None:
    store.create_index("docs", CONFIG)
    stored(store, "docs", "d1", 1, ["a", "b"])
    stored(store, "docs", "d1", 2, ["c"])
    store.write_chunks("docs", records("d1", 3, ["staged"]))
    stored(store, "docs", "d2", 1, ["keep me"])
    assert store.delete_document("docs", "d1") is True
    assert store.count_points("docs", document_id="d1") == 0
    assert store.count_points("docs") == 1
    assert store.delete_document("docs", "d1") is False
    assert [d.document_id for d in store.list_documents("docs")] == ["d2"]


# --- filters ----------------------------------------------------------------------------


def test_filters_select_by_metadata_and_document(store: VectorStore) -> None:
    store.create_index("docs", CONFIG)
    for document_id, metadata in {
        "d1": {"dept": "legal", "tags": ["a", "b"], "year": 2024, "public": True, "v.x": "q"},
        "d2": {"dept": "ops", "tags": ["c"], "year": 2023, "public": False, "score": 0.5},
        "d3": {"dept": "legal", "tags": ["b", "c"], "year": 2023},
    }.items():
        store.write_chunks(
            "docs", records(document_id, 1, [f"{document_id} text"], metadata=metadata)
        )
        store.publish("docs", document_id, 1)

    def found(raw: dict[str, object]) -> set[str]:
        hits = store.query_dense("docs", unit_vector("q"), limit=10, filter=SearchFilter.parse(raw))
        return {hit.document_id for hit in hits}

    assert found({}) == {"d1", "d2", "d3"}
    assert found({"dept": "legal"}) == {"d1", "d3"}
    assert found({"tags": ["a", "c"]}) == {"d1", "d2", "d3"}
    assert found({"tags": ["a"]}) == {"d1"}
    assert found({"tags": "c"}) == {"d2", "d3"}  # a scalar matches a list element
    assert found({"year": 2023, "dept": "legal"}) == {"d3"}
    assert found({"year": [2024, 2022]}) == {"d1"}
    assert found({"public": False}) == {"d2"}
    assert found({"score": 0.5}) == {"d2"}
    assert found({"v.x": "q"}) == {"d1"}  # a dotted key is one key, not a path
    assert found({"document_id": "d2"}) == {"d2"}
    assert found({"document_id": ["d1", "d3"], "tags": "c"}) == {"d3"}
    assert found({"dept": "nobody"}) == set()


@pytest.mark.parametrize(
    "raw",
    [
        {"dept": None},
        {"dept": {"$ne": "x"}},
        {"dept": []},
        {"tags": ["a", 1]},
        {"tags": [True, False]},
        {"year": float("nan")},
        {"bad key": "x"},
        {"": "x"},
        {f"k{i}": i for i in range(40)},
        ["dept", "legal"],
    ],
)
def test_bad_filters_are_refused(raw: object) -> None:
    with pytest.raises(InvalidFilter) as raised:
        SearchFilter.parse(raw)  # type: ignore[arg-type]
    assert raised.value.code == "invalid_filter"


# --- concurrency and local-mode safety ----------------------------------------------------


def test_threads_share_one_store(store: VectorStore) -> None:
    store.create_index("docs", CONFIG)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for version in (1, 2):
                stored(
                    store,
                    "docs",
                    f"w{worker}",
                    version,
                    [f"w{worker} v{version} {i}" for i in range(5)],
                )
                store.query_sparse("docs", encode_query(f"w{worker}"), limit=5)
                store.retire("docs", f"w{worker}", keep_version=version)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.count_points("docs") == 40
    assert {d.version for d in store.list_documents("docs")} == {2}


_OPEN_IN_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from pipeline.errors import StoreLocked
    from pipeline.settings import Settings
    from pipeline.store import VectorStore
    try:
        VectorStore.open(Settings(data_dir=Path(sys.argv[1]))).close()
    except StoreLocked as exc:
        print(exc.code, exc.message)
        sys.exit(3)
    print("opened")
    """
)


def _open_in_child(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _OPEN_IN_CHILD, str(data_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_second_process_is_refused_clearly(tmp_path: Path) -> None:
    import os

    with VectorStore.open(Settings(data_dir=tmp_path)) as holder:
        holder.create_index("docs", CONFIG)
        child = _open_in_child(tmp_path)
        assert child.returncode == 3, child.stderr
        assert child.stdout.startswith("store_locked ")
        assert f"in use by another process (pid {os.getpid()})" in child.stdout
        assert "DOCINGEST_QDRANT_URL" in child.stdout
        assert "Traceback" not in child.stderr
        with pytest.raises(StoreLocked):  # a second store in this process is refused too
            VectorStore.open(Settings(data_dir=tmp_path))
        assert holder.get_index("docs") is not None  # the holder is unharmed
    child = _open_in_child(tmp_path)
    assert (child.returncode, child.stdout.strip()) == (0, "opened")


def test_unreachable_server_is_a_dependency_error() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with VectorStore.open(Settings(qdrant_url=f"http://127.0.0.1:{port}")) as store:
        with pytest.raises(DependencyUnavailable) as raised:
            store.ping()
        assert raised.value.code == "dependency_unavailable"
        with pytest.raises(DependencyUnavailable):
            store.get_index("docs")
        with pytest.raises(DependencyUnavailable):
            store.write_chunks("docs", records("d1", 1, ["text"]))


def test_closed_store_refuses_calls(tmp_path: Path) -> None:
    store = VectorStore.open(Settings(qdrant_url=":memory:", data_dir=tmp_path))
    store.close()
    store.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        store.list_indexes()


def test_local_collections_write_ahead(tmp_path: Path) -> None:
    import sqlite3

    with VectorStore.open(Settings(data_dir=tmp_path)) as store:
        store.create_index("docs", CONFIG)
        stored(store, "docs", "d1", 1, ["text"])
    files = list((tmp_path / "qdrant").rglob("storage.sqlite"))
    assert len(files) == 1
    with sqlite3.connect(files[0]) as database:  # the journal mode is kept in the file
        assert database.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    with VectorStore.open(Settings(data_dir=tmp_path)) as reopened:
        assert reopened.count_points("docs", state="live") == 1
