"""The vector store on every engine (Edge, qdrant-client, Postgres): indexes, points, documents,
locks."""

from __future__ import annotations

import dataclasses
import hashlib
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import Histogram

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.embedders.base import EmbeddingConfig
from docingest.pipeline.errors import (
    DependencyUnavailable,
    DocumentNotFound,
    IndexConflict,
    IndexNotFound,
    InvalidFilter,
    InvalidIndexName,
    StoreLocked,
)
from docingest.pipeline.rerank import RerankConfig
from docingest.pipeline.settings import ChunkUnit, Settings
from docingest.pipeline.sparse import encode_document, encode_query
from docingest.pipeline.store import (
    ChunkRecord,
    DocumentFields,
    IndexConfig,
    SearchFilter,
    VectorStore,
    point_id,
    validate_index_name,
)
from docingest.pipeline.store.client import ClientEngine
from docingest.pipeline.store.edge import EdgeEngine
from docingest.pipeline.store.edge_optimizer import CHECK_INTERVAL_SECONDS
from tests.support.engines import ENGINES, engine_fields
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[3]
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


def store_settings(engine: str, tmp_path: Path) -> Settings:
    return Settings(**engine_fields(engine, tmp_path), data_dir=tmp_path)


@pytest.fixture(params=ENGINES)
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


def test_foreign_collection_with_the_prefix(tmp_path: Path) -> None:
    from qdrant_client import models  # only to plant a collection docingest did not make

    with VectorStore.open(store_settings("qdrant-client", tmp_path)) as store:
        assert isinstance(store.engine, ClientEngine)
        store.engine.client.create_collection(
            "docingest_alien",
            vectors_config=models.VectorParams(size=4, distance=models.Distance.COSINE),
        )
        assert store.get_index("alien") is None
        assert store.list_indexes() == []
        with pytest.raises(IndexConflict, match="not made by docingest"):
            store.create_index("alien", CONFIG)


def test_an_index_rerank_changes_in_place_and_survives_a_reopen(
    store: VectorStore, tmp_path: Path
) -> None:
    """The one setting that may change once vectors exist (issue 28): the stored config
    takes the new `rerank`, other settings stay, and another process reads it."""
    store.create_index("docs", CONFIG)
    stored(store, "docs", "d1", 1, ["one", "two"])
    wanted = RerankConfig(provider="tei", candidates=30)
    info, created = store.create_index("docs", CONFIG.model_copy(update={"rerank": wanted}))
    assert not created and info.rerank == wanted and info.chunks == 2
    config = store.index_config("docs")
    assert config is not None and config.rerank == wanted
    assert config.embedding == CONFIG.embedding and config.created_at == info.created_at
    cleared, _ = store.create_index("docs", CONFIG)
    assert cleared.rerank is None and store.index_config("docs").rerank is None  # type: ignore[union-attr]
    if isinstance(store.engine, EdgeEngine):  # the embedded store: reopen it
        store.create_index("docs", CONFIG.model_copy(update={"rerank": wanted}))
        store.close()
        with VectorStore.open(store_settings("edge", tmp_path)) as reopened:
            assert reopened.index_config("docs").rerank == wanted  # type: ignore[union-attr]


def test_an_edge_index_whose_creation_was_cut_short_is_made_anew(tmp_path: Path) -> None:
    half_made = tmp_path / "edge" / "docingest_docs" / "shard"
    half_made.mkdir(parents=True)  # a crash before index.json was written
    (half_made / "leftover").write_text("x")
    with VectorStore.open(store_settings("edge", tmp_path)) as store:
        assert store.get_index("docs") is None
        assert store.list_indexes() == []
        _, created = store.create_index("docs", CONFIG)
        assert created
        stored(store, "docs", "d1", 1, ["alpha"])
        assert store.count_points("docs", state="live") == 1
    assert not (half_made / "leftover").exists()


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
    assert found({"year": 2**63 - 1}) == found({"year": [-(2**63)]}) == set()  # int64's ends


@pytest.mark.parametrize(
    "raw",
    [
        {"dept": None},
        {"dept": {"$ne": "x"}},
        {"dept": []},
        {"tags": ["a", 1]},
        {"tags": [True, False]},
        {"year": float("nan")},
        {"year": 2**63},  # beyond int64: Edge's binding raised OverflowError (a 500)
        {"year": -(2**63) - 1},
        {"year": [2024, 123456789012345678901234567890]},
        {"bad key": "x"},
        {"": "x"},
        {f"k{i}": i for i in range(70)},
        ["dept", "legal"],
    ],
)
def test_bad_filters_are_refused(raw: object) -> None:
    with pytest.raises(InvalidFilter) as raised:
        SearchFilter.parse(raw)  # type: ignore[arg-type]
    assert raised.value.code == "invalid_filter"


# --- concurrency and one-process safety -------------------------------------------------------


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
    from docingest.pipeline.errors import StoreLocked
    from docingest.pipeline.settings import Settings
    from docingest.pipeline.store import VectorStore
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


def test_the_previous_local_mode_store_is_migrated_on_first_start(tmp_path: Path) -> None:
    """Indexes written by the previous release (qdrant-client local mode under data_dir/qdrant)
    are copied into Edge on the first start, with their config, live and staged points; the
    old files are kept, renamed."""
    from qdrant_client import QdrantClient, models

    from docingest.pipeline.store.requests import METADATA_KEY, point_of

    legacy = tmp_path / "qdrant"
    client = QdrantClient(path=str(legacy))
    client.create_collection(  # as the previous release's store created it
        "docingest_docs",
        vectors_config={"dense": models.VectorParams(size=DIMS, distance=models.Distance.COSINE)},
        sparse_vectors_config={"keyword": models.SparseVectorParams(modifier=models.Modifier.IDF)},
        metadata={METADATA_KEY: {"index": "docs", "config": CONFIG.model_dump(mode="json")}},
    )
    live = [point_of("docs", r).to_qdrant() for r in records("d1", 1, ["alpha harbour", "beta"])]
    staged = [point_of("docs", r).to_qdrant() for r in records("d2", 1, ["gamma"])]
    client.upsert("docingest_docs", points=live + staged)
    client.set_payload(
        "docingest_docs",
        {"state": "live"},
        points=models.Filter(
            must=[models.FieldCondition(key="document_id", match=models.MatchValue(value="d1"))]
        ),
    )
    client.close()

    with VectorStore.open(Settings(data_dir=tmp_path)) as store:
        assert isinstance(store.engine, EdgeEngine)
        assert store.index_config("docs") == CONFIG
        assert [(d.document_id, d.chunks) for d in store.list_documents("docs")] == [("d1", 2)]
        assert store.count_points("docs", state="staged") == 1
        hits = store.query_sparse("docs", encode_query("harbour"), limit=5)
        assert [(h.document_id, h.chunk_index) for h in hits] == [("d1", 0)]
    assert not legacy.exists()
    assert (tmp_path / "qdrant.migrated" / "collection" / "docingest_docs").is_dir()
    with VectorStore.open(Settings(data_dir=tmp_path)) as reopened:  # once only
        assert reopened.count_points("docs") == 3


def test_an_indexed_edge_shard_answers_with_exact_cosines(tmp_path: Path) -> None:
    """Once indexed, the dense search walks HNSW over int8 copies of the vectors and rescores
    its candidates with the float32 originals: the same top chunks, with the scores an exact
    scan gives."""
    settings = Settings(data_dir=tmp_path, edge_optimize_after_points=1000)
    texts = [f"chunk {n} on harbour {n % 13} and pier {n % 7}" for n in range(1500)]
    written = [r for s in range(0, 1500, 100) for r in records(f"d{s}", 1, texts[s : s + 100])]
    query = unit_vector("harbour 5")
    exact = sorted(written, key=lambda r: -float(r.dense @ query))[:10]
    with VectorStore.open(settings) as store:
        assert isinstance(store.engine, EdgeEngine)
        store.create_index("docs", CONFIG)
        store.write_chunks("docs", written)
        for start in range(0, 1500, 100):
            store.publish("docs", f"d{start}", 1)
        store.engine.optimize("docs")
        assert store.engine.pending_points("docs") == 0  # every dense vector is in HNSW
        hits = store.query_dense("docs", query, limit=10)
    assert [(h.document_id, h.chunk_index) for h in hits] == [
        (r.document_id, r.chunk_index) for r in exact
    ]
    assert [h.score for h in hits] == pytest.approx(
        [float(r.dense @ query) for r in exact], abs=1e-6
    )


def _observations(histogram: Histogram) -> float:
    """How many values a Prometheus histogram has observed so far."""
    samples = list(histogram.collect())[0].samples
    return next(sample.value for sample in samples if sample.name.endswith("_count"))


def test_the_edge_optimizer_indexes_what_was_written_once_due(tmp_path: Path) -> None:
    """Once `edge_optimize_after_points` points are published, the background thread builds
    their HNSW index while searches go on (it does not wait for an idle store, which steady
    searches would put off for ever); searches meanwhile see every point."""
    from docingest.pipeline import metrics

    before = _observations(metrics.STORE_OPTIMIZE_SECONDS)
    settings = Settings(data_dir=tmp_path, edge_optimize_after_points=1000)
    with VectorStore.open(settings) as store:
        engine = store.engine
        assert isinstance(engine, EdgeEngine)
        store.create_index("docs", CONFIG)
        texts = [f"chunk number {n} about harbour {n % 7}" for n in range(1000)]
        batches = [
            records(f"d{start}", 1, texts[start : start + 200]) for start in range(0, 1000, 200)
        ]
        for batch in batches[:4]:  # 800 points published: not due yet
            store.write_chunks("docs", batch)
            store.publish("docs", batch[0].document_id, 1)
        # Not due: several of the thread's checks pass and nothing is built.
        time.sleep(4 * CHECK_INTERVAL_SECONDS)
        assert engine.pending_points("docs") == 800
        assert _observations(metrics.STORE_OPTIMIZE_SECONDS) == before
        for batch in batches[4:]:
            store.write_chunks("docs", batch)
            store.publish("docs", batch[0].document_id, 1)
        assert len(store.query_dense("docs", unit_vector("harbour 3"), limit=1000)) == 1000

        def built_while_searched() -> bool:  # a search at every look: the build goes ahead
            store.query_dense("docs", unit_vector("harbour 3"), limit=1)
            return engine.pending_points("docs") == 0

        wait_until(built_while_searched, what="the index build", timeout=120, poll=0.05)
        assert len(store.query_dense("docs", unit_vector("harbour 3"), limit=1000)) == 1000
    assert _observations(metrics.STORE_OPTIMIZE_SECONDS) > before


def test_staged_points_wait_for_their_publish_before_a_build(tmp_path: Path) -> None:
    """A build that indexed staged points would build them twice (the publish copies indexed
    points back), so staged points alone do not make one due; their publish does."""
    from docingest.pipeline import metrics

    settings = Settings(data_dir=tmp_path, edge_optimize_after_points=1000)
    with VectorStore.open(settings) as store:
        engine = store.engine
        assert isinstance(engine, EdgeEngine)
        store.create_index("docs", CONFIG)
        staged = records("long", 1, [f"chunk {n} of a long report" for n in range(2000)])
        store.write_chunks("docs", staged)
        before = _observations(metrics.STORE_OPTIMIZE_SECONDS)
        time.sleep(4 * CHECK_INTERVAL_SECONDS)
        assert _observations(metrics.STORE_OPTIMIZE_SECONDS) == before
        assert engine.pending_points("docs") == 2000
        store.publish("docs", "long", 1)
        wait_until(
            lambda: engine.pending_points("docs") == 0, what="the build", timeout=120, poll=0.1
        )
        assert store.count_points("docs", state="live") == 2000


def _wal_bytes(shard_dir: Path) -> int:
    """Bytes the shard's WAL holds on disk (its files are sparse: allocated blocks count)."""
    return sum(path.stat().st_blocks * 512 for path in (shard_dir / "wal").iterdir())


def test_the_edge_store_flushes_written_shards_so_the_wal_stays_small(tmp_path: Path) -> None:
    """Edge truncates its WAL only on a flush: the background thread flushes a written shard
    within `FLUSH_INTERVAL_SECONDS`, so the WAL does not keep a copy of every point. 100 MB of
    text go through it (it does not compress: unflushed, it holds them all); once flushed it
    keeps at most its two preallocated 32 MB files."""
    from docingest.pipeline import metrics
    from docingest.pipeline.store.edge_optimizer import FLUSH_INTERVAL_SECONDS

    before = _observations(metrics.STORE_FLUSH_SECONDS)
    with VectorStore.open(Settings(data_dir=tmp_path)) as store:
        store.create_index("docs", CONFIG)
        filler = "harbour " * 4000  # 32 KB of payload a chunk (only the payload: quick to encode)
        for start in range(0, 3200, 400):
            batch = records(f"d{start}", 1, [f"chunk {n}" for n in range(400)])
            store.write_chunks("docs", [dataclasses.replace(r, text=filler) for r in batch])
        shard_dir = tmp_path / "edge" / "docingest_docs" / "shard"
        wait_until(
            lambda: _wal_bytes(shard_dir) <= 64 * 2**20,
            timeout=FLUSH_INTERVAL_SECONDS * 6,
            what="the WAL truncated by a flush",
        )
        assert store.count_points("docs") == 3200
    assert _observations(metrics.STORE_FLUSH_SECONDS) > before


def _threads() -> int:
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Threads:")).split()[1])


def test_idle_edge_shards_are_closed_and_loaded_again_on_use(tmp_path: Path) -> None:
    """A shard no call has used for `edge_idle_close_seconds` is closed: idle indexes hold
    no shard, hence none of Edge's threads (this process's thread count falls back to what
    it was before they were created); the next call loads it again, with its points."""
    settings = Settings(data_dir=tmp_path, edge_idle_close_seconds=2)
    with VectorStore.open(settings) as store:
        assert isinstance(store.engine, EdgeEngine)
        engine = store.engine
        baseline = _threads()
        for number in range(20):
            store.create_index(f"idle-{number}", CONFIG)
        assert engine.open_shards() >= 1  # the last ones, just used
        wait_until(lambda: engine.open_shards() == 0, timeout=60, what="the idle close")
        # Edge's threads of a closed shard wind down on their own: within noise, none is left
        # per idle index.
        wait_until(lambda: _threads() <= baseline + 2, timeout=60, what="the threads to end")
        batch = records("d1", 1, ["chunk about the harbour", "another about the river"])
        store.write_chunks("idle-3", batch)
        store.publish("idle-3", "d1", 1)
        assert engine.open_shards() == 1
        wait_until(lambda: engine.open_shards() == 0, timeout=60, what="the idle close")
        assert store.count_points("idle-3") == 2  # loaded again, with what was written


@pytest.mark.parametrize("dimensions", [3072, 4096])
def test_postgres_takes_vectors_wider_than_its_hnsw_on_vector(
    tmp_path: Path, dimensions: int
) -> None:
    """pgvector's HNSW takes 2,000 dimensions of `vector`: wider models (3,072 for
    text-embedding-3-large) get a graph over half-precision copies, the widest an exact scan;
    scores are exact cosines either way, best first."""
    config = IndexConfig(
        embedding=EmbeddingConfig(provider="openai", model="wide", dimensions=dimensions)
    )
    rng = np.random.default_rng(dimensions)
    vectors = rng.normal(size=(5, dimensions)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with VectorStore.open(store_settings("postgres", tmp_path)) as store:
        store.create_index("wide", config)
        chunks = [
            dataclasses.replace(chunk, dense=vectors[n])
            for n, chunk in enumerate(records("d1", 1, [f"chunk {n}" for n in range(5)]))
        ]
        store.write_chunks("wide", chunks)
        store.publish("wide", "d1", 1)
        query = vectors[3] + 0.1 * vectors[1]
        hits = store.query_dense("wide", query, limit=5)
    expected = vectors @ (query / np.linalg.norm(query))
    assert [hit.chunk_index for hit in hits] == list(np.argsort(-expected))
    assert [round(hit.score, 4) for hit in hits] == [
        round(float(s), 4) for s in sorted(expected, reverse=True)
    ]
