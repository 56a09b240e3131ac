"""The local embedder on real text: shape, order, ranking, offline use, and its refusals."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from docingest.pipeline.chunking.tokens import TokenCounter
from docingest.pipeline.embedders.artifacts import LOCAL_MODEL
from docingest.pipeline.embedders.base import COUNTERS, EmbeddingConfig
from docingest.pipeline.embedders.local import LocalEmbedder, plan_batches
from docingest.pipeline.embedders.registry import build_embedder
from docingest.pipeline.errors import EmbeddingFailed
from docingest.pipeline.settings import Settings
from tests.support.paths import REPO_DIR

REPO = REPO_DIR

# SciFact test queries and the abstract judged relevant to each (qrels/test.tsv).
SCIFACT_PAIRS = [
    ("3", "14717500"),  # rare variants / genome-wide association
    ("5", "13734012"),  # abnormal prion protein in UK appendixes
]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder.load()


@pytest.fixture(scope="module")
def scifact(corpus_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Return the SciFact queries and the "title text" of the documents used here."""
    folder = corpus_dir / "retrieval" / "scifact"
    wanted = {doc_id for _, doc_id in SCIFACT_PAIRS} | {"31715818"}
    queries = {}
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        query = json.loads(line)
        queries[query["_id"]] = query["text"]
    docs = {}
    for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        if doc["_id"] in wanted:
            docs[doc["_id"]] = f"{doc['title']} {doc['text']}"
    return queries, docs


def test_vectors_are_unit_float32_of_384(embedder: LocalEmbedder) -> None:
    vectors = embedder.embed_documents(["The cat sat on the mat.", "", "Quantum chromodynamics"])
    assert vectors.dtype == np.float32
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    query = embedder.embed_query("The cat sat on the mat.")
    assert query.shape == (384,) and query.dtype == np.float32
    assert float(query @ vectors[0]) > 0.9999
    assert embedder.embed_documents([]).shape == (0, 384)
    assert (embedder.provider, embedder.model, embedder.dimensions) == (
        "local",
        "all-MiniLM-L6-v2",
        384,
    )


def test_embedding_is_deterministic(embedder: LocalEmbedder) -> None:
    texts = ["Mitochondria are the powerhouse of the cell.", "Interest rates rose again."]
    assert np.array_equal(embedder.embed_documents(texts), embedder.embed_documents(texts))


def test_order_is_kept_across_very_different_lengths(
    embedder: LocalEmbedder, scifact: tuple[dict[str, str], dict[str, str]]
) -> None:
    _, docs = scifact
    long_text = docs["13734012"]
    texts = [
        long_text * 2,  # beyond 512 tokens: truncated
        "hi",
        docs["31715818"],
        "",
        "Prions in appendix samples",
        long_text,
        docs["14717500"],
        "a",
    ]
    batch = embedder.embed_documents(texts)
    alone = np.stack([embedder.embed_documents([text])[0] for text in texts])
    assert np.all(np.sum(batch * alone, axis=1) > 0.999)
    # Distinct texts stay distinct: a shuffled order would not match the texts alone.
    assert float(batch[1] @ alone[2]) < 0.9


def test_threads_share_one_embedder(embedder: LocalEmbedder) -> None:
    groups = [
        [f"{topic} number {index}" for index in range(20)] for topic in ("rain", "tax", "jazz")
    ]
    expected = [embedder.embed_documents(group) for group in groups]
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(embedder.embed_documents, groups * 2))
    for result, wanted in zip(results, expected * 2, strict=True):
        assert np.all(np.sum(result * wanted, axis=1) > 0.9999)


def test_progress_and_counters_follow_internal_batches(embedder: LocalEmbedder) -> None:
    texts = [f"sentence number {index} about rivers" for index in range(embedder.max_batch * 2 + 5)]
    seen: list[int] = []
    before = COUNTERS.snapshot()
    embedder.embed_documents(texts, on_progress=seen.append)
    after = COUNTERS.snapshot()
    assert seen == [embedder.max_batch, embedder.max_batch * 2, len(texts)]
    assert after["inputs"] - before["inputs"] == len(texts)
    assert after["requests"] - before["requests"] == 3
    assert after["tokens"] - before["tokens"] >= len(texts) * 6  # [CLS] 4 words [SEP] or more


def test_batches_are_bounded_by_count_and_padded_tokens() -> None:
    lengths = [300, 10, 120, 600, 40, 128, 128, 250, 5]
    plan = plan_batches(lengths, max_batch=3, max_tokens=512)
    assert sorted(index for batch in plan for index in batch) == list(range(len(lengths)))
    assert [[lengths[index] for index in batch] for batch in plan] == [
        [600],  # longer than the budget: alone
        [300],  # a second input would pad to 2 × 300 > 512
        [250, 128],  # a third would pad to 3 × 250
        [128, 120, 40],  # 3 × 128 = 384 padded tokens, and the count bound
        [10, 5],
    ]
    assert plan_batches([], max_batch=16, max_tokens=2048) == []


def test_a_token_budget_changes_batches_not_vectors(
    embedder: LocalEmbedder, scifact: tuple[dict[str, str], dict[str, str]]
) -> None:
    _, docs = scifact
    texts = [*docs.values(), *(f"short sentence {index} on tides" for index in range(20))]
    by_count = embedder.embed_documents(texts)
    small = LocalEmbedder.load(max_batch_tokens=300)
    requests = COUNTERS.snapshot()["requests"]
    by_tokens = small.embed_documents(texts)
    assert COUNTERS.snapshot()["requests"] - requests > len(texts) // embedder.max_batch + 1
    assert float(np.abs(by_tokens - by_count).max()) < 1e-5


def test_settings_give_the_local_model_its_token_budget() -> None:
    built = build_embedder(EmbeddingConfig(), settings=Settings(local_model_batch_tokens=512))
    assert isinstance(built, LocalEmbedder)
    assert built.max_batch_tokens == 512


def test_relevant_abstract_ranks_above_unrelated(
    embedder: LocalEmbedder, scifact: tuple[dict[str, str], dict[str, str]]
) -> None:
    queries, docs = scifact
    doc_ids = list(docs)
    doc_vectors = embedder.embed_documents([docs[doc_id] for doc_id in doc_ids])
    for query_id, relevant in SCIFACT_PAIRS:
        similarities = doc_vectors @ embedder.embed_query(queries[query_id])
        assert doc_ids[int(np.argmax(similarities))] == relevant, queries[query_id]


def test_paraphrases_are_closer_than_unrelated_sentences(embedder: LocalEmbedder) -> None:
    a, b, unrelated = embedder.embed_documents(
        [
            "The patient's blood pressure fell sharply after the drug was given.",
            "Administering the medication caused a steep drop in the patient's blood pressure.",
            "The orchestra rehearsed the symphony in the old concert hall.",
        ]
    )
    assert float(a @ b) > 0.7
    assert float(a @ b) > float(a @ unrelated) + 0.4


def test_max_seq_length_truncates(embedder: LocalEmbedder) -> None:
    head = " ".join(["photosynthesis converts light into chemical energy"] * 30)  # ~180 tokens
    tails = [head + " volcanoes erupt molten rock", head + " stock markets fell sharply"]
    short = LocalEmbedder.load(max_seq_length=128)
    cut = short.embed_documents(tails)
    assert float(cut[0] @ cut[1]) > 0.99999  # the tails lie beyond token 128
    whole = embedder.embed_documents(tails)
    assert float(whole[0] @ whole[1]) < 0.99


def test_shared_token_counter_stays_untruncated(embedder: LocalEmbedder) -> None:
    embedder.embed_documents(["word " * 2000])
    assert TokenCounter()("word " * 2000) == 2000


def test_build_embedder_and_aliases_give_the_same_model() -> None:
    built = build_embedder(EmbeddingConfig(), settings=Settings(local_model_threads=1))
    alias = LocalEmbedder.load("sentence-transformers/all-MiniLM-L6-v2", dimensions=384)
    assert built.model == alias.model == "all-MiniLM-L6-v2"
    text = "Heat shock proteins fold other proteins."
    assert float(built.embed_query(text) @ alias.embed_query(text)) > 0.9999


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": "text-embedding-3-small"}, "available: all-MiniLM-L6-v2"),
        ({"model": "all-mpnet-base-v2"}, "unknown local embedding model"),
        ({"dimensions": 256}, "384 dimensions"),
        ({"dimensions": 1536}, "384 dimensions"),
        ({"max_seq_length": 1024}, "max_seq_length"),
        ({"threads": -1}, "threads"),
        ({"max_batch_tokens": 0}, "max_batch_tokens"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LocalEmbedder.load(**kwargs)  # type: ignore[arg-type]


def test_a_corrupt_model_file_is_refused(tmp_path: Path) -> None:
    intact = tmp_path / "intact.onnx"
    shutil.copyfile(LOCAL_MODEL.installed_path(), intact)
    assert LocalEmbedder.load(model_file=intact, threads=1).embed_query("ok").shape == (384,)

    corrupt = tmp_path / "corrupt.onnx"
    data = bytearray(intact.read_bytes())
    data[len(data) // 2] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    with pytest.raises(EmbeddingFailed, match="corrupt.*sha256.*reinstall") as caught:
        LocalEmbedder.load(model_file=corrupt)
    assert LOCAL_MODEL.sha256 in str(caught.value) and str(corrupt) in str(caught.value)
    assert caught.value.code == "embedding_failed"

    with pytest.raises(EmbeddingFailed, match="cannot read"):
        LocalEmbedder.load(model_file=tmp_path / "missing.onnx")


def _can_unshare_network() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(
    not _can_unshare_network(),
    reason="`unshare --net` is unavailable (needs root or user namespaces): "
    "cannot prove the model loads without a network",
)
def test_embeds_without_any_network() -> None:
    script = textwrap.dedent(
        """
        import socket, sys
        try:
            socket.create_connection(("1.1.1.1", 443), timeout=2)
        except OSError:
            pass
        else:
            sys.exit("the network is reachable: the test proves nothing")
        from docingest.pipeline.embedders.local import LocalEmbedder, plan_batches
        vector = LocalEmbedder.load().embed_query("offline embedding")
        assert vector.shape == (384,), vector.shape
        assert "huggingface_hub" not in sys.modules
        print("embedded", round(float(vector @ vector), 4))
        """
    )
    result = subprocess.run(
        ["unshare", "--net", sys.executable, "-c", script],
        cwd=REPO,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "embedded 1.0"
