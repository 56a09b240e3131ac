"""Search on real MiniLM embeddings and real keyword vectors, on both store engines."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from docingest.pipeline.embedders.base import EmbeddingConfig, QueryCache
from docingest.pipeline.embedders.local import LocalEmbedder
from docingest.pipeline.errors import IndexNotFound, InvalidFilter
from docingest.pipeline.search import SearchTarget, resolve_target, search
from docingest.pipeline.search.candidates import RRF_K, VECTOR_WEIGHT, Fusion, candidate_limit, rrf
from docingest.pipeline.search.request import Result, Scores, SearchRequest
from docingest.pipeline.settings import Settings
from docingest.pipeline.sparse import encode_document, encode_query
from docingest.pipeline.store import (
    ChunkRecord,
    DocumentFields,
    IndexConfig,
    ScoredChunk,
    VectorStore,
)
from tests.support.engines import ENGINES, engine_fields

INDEX = "kb"
CONFIG = IndexConfig(
    embedding=EmbeddingConfig(provider="local", model="all-MiniLM-L6-v2", dimensions=384)
)
ERROR_CODE = "ERR_TLS_CERT_ALTNAME_INVALID"
QDRANT_DEFAULT_RRF_K = 2  # what `FusionQuery(fusion=RRF)` uses

# Four chunks about certificate host-name errors, one release note naming the error code once.
DOCS: dict[str, tuple[dict[str, object], list[str]]] = {
    "tls-guide": ({"dept": "security", "tags": ["tls", "howto"], "year": 2024, "public": True}, [
        "TLS handshake failures often come from a certificate whose subject alternative names do "
        "not include the host name the client asked for; the client then rejects the connection.",
        "When a client validates a server certificate it checks the chain of trust, the validity "
        "dates and whether the requested host name appears in the certificate.",
        "A certificate issued for www.example.com is rejected for api.example.com unless a "
        "wildcard or an extra subject alternative name covers it.",
        "Hostname verification errors mean the certificate is valid but was issued for a "
        "different name than the one in the URL.",
    ]),
    "cert-renewal": ({"dept": "security", "tags": ["tls", "ops"], "year": 2023, "public": False}, [
        "Renew certificates before they expire: ACME clients such as certbot request a new "
        "certificate every sixty days.",
        "An expired or not yet valid certificate makes every TLS client refuse the connection "
        "with a certificate error.",
        "Intermediate certificates must be served with the leaf certificate, otherwise clients "
        "cannot build the chain to a trusted root.",
    ]),
    "proxy-setup": ({"dept": "ops", "tags": ["network"], "year": 2023, "public": True}, [
        "Corporate proxies that inspect TLS traffic replace server certificates with their own; "
        "install the proxy's root CA to avoid certificate validation errors.",
        "Set HTTPS_PROXY and NO_PROXY so internal hosts bypass the inspecting proxy.",
    ]),
    "release-notes": ({"dept": "engineering", "tags": ["changelog"], "year": 2025,
                       "public": True}, [
        "Release 4.2 rotates log files daily, accepts YAML anchors in the configuration loader, "
        f"drops Python 3.8, and no longer retries {ERROR_CODE} by default.",
        "Release 4.1 added a dark theme to the dashboard, made CSV exports faster and fixed a "
        "memory leak in the scheduler.",
        "Release 4.0 introduced the plugin API and a new storage engine for attachments.",
    ]),
    "bread": ({"dept": "kitchen", "tags": ["food"], "year": 2022, "public": True}, [
        "Knead the dough for ten minutes until it is smooth and elastic, then let it rise in a "
        "warm place for an hour.",
        "Bake the loaf at 230 degrees for thirty minutes, with a tray of water in the oven for a "
        "crisp crust.",
    ]),
    "garden": ({"dept": "garden", "tags": ["plants", "food"], "year": 2024, "public": False}, [
        "Tomatoes need full sun, deep watering twice a week and a stake to climb.",
        "Prune roses in late winter, cutting just above an outward-facing bud.",
    ]),
    "postgres": ({"dept": "engineering", "tags": ["database"], "year": 2024, "public": True}, [
        "Raise shared_buffers to a quarter of memory and tune work_mem for large sorts in "
        "PostgreSQL.",
        "Enable SSL in PostgreSQL with ssl = on and point ssl_cert_file to the server certificate.",
    ]),
    "http-errors": ({"dept": "engineering", "tags": ["network", "howto"], "year": 2025,
                     "public": True}, [
        "A 404 status means the resource was not found; 403 means the server refuses to "
        "authorise it.",
        "A 502 Bad Gateway comes from a proxy that got an invalid response from the upstream "
        "server.",
    ]),
}  # fmt: skip
TOTAL_CHUNKS = sum(len(texts) for _, texts in DOCS.values())
QUERIES = [ERROR_CODE, "certificate host name mismatch", "bake bread in the oven", "proxy TLS"]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder.load()


def make_records(
    embedder: LocalEmbedder,
    document_id: str,
    version: int,
    texts: list[str],
    metadata: dict[str, object],
) -> list[ChunkRecord]:
    fields = DocumentFields(
        filename=f"{document_id}.md",
        format="markdown",
        content_sha256=None,
        pages=1,
        words=0,
        chunk_count=len(texts),
        metadata=metadata,
    )
    vectors = embedder.embed_documents(texts)
    return [
        ChunkRecord(
            document_id=document_id,
            version=version,
            chunk_index=index,
            text=text,
            text_hash=hashlib.sha256(text.encode()).hexdigest(),
            start=0,
            end=len(text),
            page_start=1,
            page_end=1,
            headings=[document_id],
            dense=vectors[index],
            sparse=encode_document(text),
            document=fields,
        )
        for index, text in enumerate(texts)
    ]


@pytest.fixture(scope="module")
def corpus(embedder: LocalEmbedder) -> list[ChunkRecord]:
    """Every chunk of DOCS, embedded once for the module."""
    return [
        record
        for document_id, (metadata, texts) in DOCS.items()
        for record in make_records(embedder, document_id, 1, texts, metadata)
    ]


@pytest.fixture(params=ENGINES)
def store(
    request: pytest.FixtureRequest, tmp_path: Path, corpus: list[ChunkRecord]
) -> Iterator[VectorStore]:
    settings = Settings(**engine_fields(request.param, tmp_path), data_dir=tmp_path)
    with VectorStore.open(settings) as vector_store:
        vector_store.create_index(INDEX, CONFIG)
        vector_store.write_chunks(INDEX, corpus)
        for document_id in DOCS:
            vector_store.publish(INDEX, document_id, 1)
        yield vector_store


def target(store: VectorStore, index: str, embedder: LocalEmbedder) -> SearchTarget:
    """`index` searched with `embedder`, which must be the index's model."""
    return resolve_target(store, index, embedder_for=lambda _config: embedder)


def run(store: VectorStore, embedder: LocalEmbedder, query: str, **fields: object) -> list[Result]:
    request = SearchRequest.model_validate({"query": query, **fields})
    return search(store, target(store, INDEX, embedder), request).results


def keys(results: list[Result]) -> list[tuple[str, int]]:
    return [(result.document_id, result.chunk_index) for result in results]


# --- modes --------------------------------------------------------------------------------


def test_vector_scores_are_cosine_similarities(store: VectorStore, embedder: LocalEmbedder) -> None:
    query = "certificate host name mismatch"
    results = run(store, embedder, query, mode="vector", top_k=TOTAL_CHUNKS)
    assert len(results) == TOTAL_CHUNKS
    query_vector = embedder.embed_query(query)
    texts = {(r.document_id, r.chunk_index): r.text for r in results}
    vectors = dict(zip(texts, embedder.embed_documents(list(texts.values())), strict=True))
    for result in results:
        expected = float(vectors[(result.document_id, result.chunk_index)] @ query_vector)
        assert result.score == pytest.approx(expected, abs=1e-4)
        assert result.scores.vector == result.score and result.scores.keyword is None
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    top = results[0]
    assert top.document_id == "tls-guide"
    assert (top.filename, top.format, top.page_start, top.page_end) == (
        "tls-guide.md",
        "markdown",
        1,
        1,
    )
    assert top.headings == ["tls-guide"] and top.metadata["dept"] == "security"


def test_keyword_hits_share_a_term_with_the_query(
    store: VectorStore, embedder: LocalEmbedder
) -> None:
    query = "proxy certificate"
    results = run(store, embedder, query, mode="keyword", top_k=TOTAL_CHUNKS)
    query_terms = set(encode_query(query).indices)
    matching = [
        (r.document_id, r.chunk_index)
        for r in run(store, embedder, query, mode="vector", top_k=TOTAL_CHUNKS)
        if query_terms & set(encode_document(r.text).indices)
    ]
    assert sorted(keys(results)) == sorted(matching)  # exactly the chunks holding a term
    assert all(r.score > 0 and r.scores == Scores(vector=None, keyword=r.score) for r in results)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert results[0].document_id == "proxy-setup"  # holds both terms
    assert run(store, embedder, "the and of", mode="keyword") == []  # stop words only
    assert run(store, embedder, "zyxwv", mode="keyword") == []


def test_an_exact_identifier_is_found_by_keyword_and_hybrid_not_by_vector(
    store: VectorStore, embedder: LocalEmbedder
) -> None:
    target = ("release-notes", 0)
    vector = keys(run(store, embedder, ERROR_CODE, mode="vector", top_k=3))
    keyword = keys(run(store, embedder, ERROR_CODE, mode="keyword", top_k=3))
    hybrid = run(store, embedder, ERROR_CODE, mode="hybrid", top_k=3)
    assert target not in vector  # the certificate chunks look closer to MiniLM
    assert keyword[0] == target
    assert target in keys(hybrid)
    found = hybrid[keys(hybrid).index(target)]
    assert found.scores.keyword is not None and found.scores.vector is not None


@pytest.mark.parametrize("rrf_k", [None, RRF_K])
@pytest.mark.parametrize("limit", [5, 50])
def test_client_fusion_ranks_as_qdrant_does(
    store: VectorStore, embedder: LocalEmbedder, rrf_k: int | None, limit: int
) -> None:
    """Client-side RRF equals Qdrant's RRF over the same two prefetches (ties as groups)."""
    both_lists_count = False
    for query in QUERIES:
        vector, terms = embedder.embed_query(query), encode_query(query)
        dense, keyword = store.query_both(INDEX, vector=vector, terms=terms, limit=limit)
        ours = rrf(dense, keyword, k=rrf_k or QDRANT_DEFAULT_RRF_K)
        theirs = store.query_fused(INDEX, vector=vector, terms=terms, limit=limit, rrf_k=rrf_k)
        assert len(ours) == len(theirs) >= len(dense)
        assert _tie_groups([(c.chunk.id, c.score) for c in ours]) == _tie_groups(
            [(c.id, c.score) for c in theirs]
        )
        both_lists_count |= bool(keyword) and {c.id for c in keyword} != {c.id for c in dense}
    assert both_lists_count  # some query fused two different lists


def _tie_groups(ranked: list[tuple[str, float]]) -> list[tuple[float, frozenset[str]]]:
    groups: dict[float, set[str]] = {}
    for point, score in ranked:  # 6 places: Edge computes fused scores in float32
        groups.setdefault(round(score, 6), set()).add(point)
    return [(score, frozenset(groups[score])) for score in groups]


def test_hybrid_scores_are_the_convex_combination_of_normalised_scores(
    store: VectorStore, embedder: LocalEmbedder
) -> None:
    """By default each result scores VECTOR_WEIGHT times its cosine and the rest times its
    keyword score, each min-max scaled over its list's candidates (0 where it is not in it)."""
    query = "certificate host name mismatch"
    results = run(store, embedder, query, top_k=10)
    vector, terms = embedder.embed_query(query), encode_query(query)
    dense, keyword = store.query_both(INDEX, vector=vector, terms=terms, limit=candidate_limit(10))
    assert dense and keyword and len({c.score for c in keyword}) > 1

    def scaled(hits: list[ScoredChunk]) -> dict[tuple[str, int], float]:
        low, high = min(h.score for h in hits), max(h.score for h in hits)
        return {(h.document_id, h.chunk_index): (h.score - low) / (high - low) for h in hits}

    by_vector, by_keyword = scaled(dense), scaled(keyword)
    assert len(results) == 10
    for result in results:
        key = (result.document_id, result.chunk_index)
        expected = VECTOR_WEIGHT * by_vector.get(key, 0.0) + (1 - VECTOR_WEIGHT) * by_keyword.get(
            key, 0.0
        )
        assert result.score == pytest.approx(expected)
        assert 0.0 <= result.score <= 1.0
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_hybrid_scores_are_qdrants_rrf_with_rrf_fusion(
    store: VectorStore, embedder: LocalEmbedder
) -> None:
    query = "certificate host name mismatch"
    request = SearchRequest(query=query, top_k=10)
    results = search(store, target(store, INDEX, embedder), request, fusion=Fusion("rrf")).results
    vector, terms = embedder.embed_query(query), encode_query(query)
    limit = candidate_limit(10)
    fused = store.query_fused(INDEX, vector=vector, terms=terms, limit=limit, rrf_k=RRF_K)
    by_key = {(c.document_id, c.chunk_index): c.score for c in fused}
    assert len(results) == 10
    for result in results:
        assert result.score == pytest.approx(by_key[(result.document_id, result.chunk_index)])
        assert result.scores.vector is not None or result.scores.keyword is not None


# --- selection ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
def test_max_chunks_per_document(store: VectorStore, embedder: LocalEmbedder, mode: str) -> None:
    query = "TLS certificate host name client"
    crowded = [r.document_id for r in run(store, embedder, query, mode=mode, top_k=6)]
    assert len(set(crowded)) < len(crowded)  # one document does crowd the plain ranking
    capped = run(store, embedder, query, mode=mode, top_k=4, max_chunks_per_document=1)
    documents = [r.document_id for r in capped]
    assert len(documents) == len(set(documents)) == 4
    two = [
        r.document_id
        for r in run(store, embedder, query, mode=mode, top_k=8, max_chunks_per_document=2)
    ]
    assert max(two.count(document) for document in two) == 2


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
def test_one_version_per_document(
    store: VectorStore, embedder: LocalEmbedder, corpus: list[ChunkRecord], mode: str
) -> None:
    metadata, texts = DOCS["tls-guide"]
    updated = [f"Updated guide. {text}" for text in texts]
    store.write_chunks(INDEX, make_records(embedder, "tls-guide", 2, updated, metadata))
    store.publish(INDEX, "tls-guide", 2)  # v1 and v2 are both live until v1 is retired
    query = "certificate host name TLS"
    candidates = store.query_dense(INDEX, embedder.embed_query(query), limit=50)
    assert {c.version for c in candidates if c.document_id == "tls-guide"} == {1, 2}

    results = run(store, embedder, query, mode=mode, top_k=20)
    guide = [r for r in results if r.document_id == "tls-guide"]
    assert guide and all(r.text.startswith("Updated guide.") for r in guide)
    assert len({r.chunk_index for r in guide}) == len(guide)


def test_score_threshold_in_vector_mode(store: VectorStore, embedder: LocalEmbedder) -> None:
    query = "certificate host name mismatch"
    everything = run(store, embedder, query, mode="vector", top_k=TOTAL_CHUNKS)
    kept = run(store, embedder, query, mode="vector", top_k=TOTAL_CHUNKS, score_threshold=0.4)
    assert 0 < len(kept) < len(everything)
    assert keys(kept) == [
        key for key, r in zip(keys(everything), everything, strict=True) if r.score >= 0.4
    ]


def test_score_threshold_in_hybrid_and_keyword_mode(
    store: VectorStore, embedder: LocalEmbedder
) -> None:
    hybrid = run(store, embedder, ERROR_CODE, top_k=TOTAL_CHUNKS, score_threshold=0.5)
    assert hybrid and all(r.scores.vector is not None and r.scores.vector >= 0.5 for r in hybrid)
    assert ("release-notes", 0) not in keys(hybrid)  # its similarity is below 0.5
    keyword = run(store, embedder, ERROR_CODE, mode="keyword", top_k=TOTAL_CHUNKS)
    threshold = keyword[1].score
    strict = run(
        store, embedder, ERROR_CODE, mode="keyword", top_k=TOTAL_CHUNKS, score_threshold=threshold
    )
    assert keys(strict) == [
        key for key, r in zip(keys(keyword), keyword, strict=True) if r.score >= threshold
    ]


# --- filters, isolation, errors -----------------------------------------------------------


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"dept": "security"}, {"tls-guide", "cert-renewal"}),
        ({"tags": ["network", "changelog"]}, {"proxy-setup", "http-errors", "release-notes"}),
        ({"tags": "tls", "public": True}, {"tls-guide"}),
        ({"year": 2025}, {"release-notes", "http-errors"}),
        ({"document_id": "postgres"}, {"postgres"}),
        ({"document_id": ["postgres", "proxy-setup"], "dept": "ops"}, {"proxy-setup"}),
    ],
)
def test_filters(
    store: VectorStore,
    embedder: LocalEmbedder,
    mode: str,
    raw: dict[str, object],
    expected: set[str],
) -> None:
    query = "server certificate proxy release"  # has terms in every expected document
    results = run(store, embedder, query, mode=mode, top_k=TOTAL_CHUNKS, filter=raw)
    assert {r.document_id for r in results} == expected


def test_indexes_are_searched_alone(store: VectorStore, embedder: LocalEmbedder) -> None:
    store.create_index("other", CONFIG)
    intruder = make_records(embedder, "release-notes", 1, [f"{ERROR_CODE} in another index"], {})
    store.write_chunks("other", intruder)
    store.publish("other", "release-notes", 1)
    own_texts = {text for _, texts in DOCS.values() for text in texts}
    for mode in ("vector", "keyword", "hybrid"):
        results = run(store, embedder, ERROR_CODE, mode=mode, top_k=TOTAL_CHUNKS)
        assert results and {r.text for r in results} <= own_texts
    other = search(store, target(store, "other", embedder), SearchRequest(query=ERROR_CODE))
    assert [r.text for r in other.results] == [f"{ERROR_CODE} in another index"]


def test_the_index_embedder_is_required(store: VectorStore, embedder: LocalEmbedder) -> None:
    store.create_index(
        "minilm-l12",
        IndexConfig(embedding=EmbeddingConfig(model="all-MiniLM-L12-v2", dimensions=384)),
    )
    with pytest.raises(ValueError, match="all-MiniLM-L12-v2"):
        target(store, "minilm-l12", embedder)


def test_the_target_asks_once_for_the_embedder_of_the_index_model(
    store: VectorStore, embedder: LocalEmbedder
) -> None:
    asked: list[EmbeddingConfig] = []

    def embedder_for(config: EmbeddingConfig) -> LocalEmbedder:
        asked.append(config)
        return embedder

    found = resolve_target(store, INDEX, embedder_for=embedder_for)
    assert asked == [CONFIG.embedding]
    assert (found.index, found.embedder) == (INDEX, embedder)


def test_errors(store: VectorStore, embedder: LocalEmbedder) -> None:
    with pytest.raises(IndexNotFound):
        target(store, "missing", embedder)
    with pytest.raises(InvalidFilter):
        search(
            store,
            target(store, INDEX, embedder),
            SearchRequest(query="q", filter={"dept": {"a": 1}}),
        )


def test_query_cache_and_timing(store: VectorStore, embedder: LocalEmbedder) -> None:
    cache = QueryCache(8)
    request = SearchRequest(query="bake bread")
    kb = target(store, INDEX, embedder)
    first = search(store, kb, request, query_cache=cache)
    second = search(store, kb, request, query_cache=cache)
    assert (cache.misses, cache.hits) == (1, 1)
    assert keys(first.results) == keys(second.results)
    assert first.results[0].document_id == "bread"
    assert first.took_ms > 0 and second.took_ms > 0
    search(store, kb, SearchRequest(query="other", mode="keyword"), query_cache=cache)
    assert cache.misses == 1  # keyword mode embeds nothing


# --- congruence of the two engines --------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"mode": "vector"},
        {"mode": "keyword"},
        {"mode": "hybrid"},
        {"mode": "hybrid", "filter": {"dept": "security"}},
        {"mode": "hybrid", "filter": {"public": False, "tags": ["tls", "network"]}},
        {"mode": "hybrid", "max_chunks_per_document": 1},
    ],
)
def test_both_engines_give_the_same_results_in_the_same_order(
    tmp_path: Path, corpus: list[ChunkRecord], embedder: LocalEmbedder, fields: dict[str, object]
) -> None:
    """The same writes and the same queries give the same results, in the same order, with the
    same per-retriever scores, on Edge and on qdrant-client (the server's stand-in). Scores
    agree to 1e-6, relative where they are larger than 1: local mode computes cosines in
    float64, Edge in float32, and a keyword score near 20 is one float32 step (1.9e-6) from
    its neighbour, a step the two engines' summation orders can differ by. Hybrid's fused
    scores agree to 1e-5: scaling a list by its spread magnifies those steps."""
    answers = []
    for url in (":memory:", None):
        with VectorStore.open(Settings(qdrant_url=url, data_dir=tmp_path / str(url))) as store:
            store.create_index(INDEX, CONFIG)
            store.write_chunks(INDEX, corpus)
            for document_id in DOCS:
                store.publish(INDEX, document_id, 1)
            answers.append(
                [
                    [
                        (hit.document_id, hit.chunk_index, hit.score, hit.metadata)
                        for hit in run(store, embedder, query, top_k=8, **fields)
                    ]
                    for query in QUERIES
                ]
            )
    client, edge = answers
    assert any(client), "the queries found something"
    # rounding both would split a pair straddling a boundary (0.6772150 vs 0.6772149)
    assert [[hit[:2] + hit[3:] for hit in hits] for hits in edge] == [
        [hit[:2] + hit[3:] for hit in hits] for hits in client
    ]
    scores = [[hit[2] for hit in hits] for hits in client]
    tolerance = 1e-5 if fields.get("mode", "hybrid") == "hybrid" else 1e-6
    assert [[hit[2] for hit in hits] for hits in edge] == [
        pytest.approx(s, rel=tolerance, abs=tolerance) for s in scores
    ]
