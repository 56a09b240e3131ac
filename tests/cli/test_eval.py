"""`docingest eval`: the metrics by hand, the BEIR reader, and the command against a real
`docingest serve` (a small BEIR-layout set loaded with `--ingest`, then evaluated)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from docingest import beir
from docingest.evaluate import (
    Variant,
    VariantResult,
    mean_ndcg_and_recall,
    mrr_at,
    ndcg_at,
    recall_at,
    unreranked,
    variants,
)
from tests.cli.test_client_commands import docingest
from tests.support.docingest_service import ServiceEnv, running_serve

# --- metrics ------------------------------------------------------------------------------


def test_ndcg_by_hand() -> None:
    relevant = {"a": 1, "b": 2}
    # b (gain 2) at rank 2, a (gain 1) at rank 3; ideal: b first, then a
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    ideal = 2 / math.log2(2) + 1 / math.log2(3)
    assert ndcg_at(["x", "b", "a"], relevant) == pytest.approx(dcg / ideal)
    assert ndcg_at(["b", "a"], relevant) == pytest.approx(1.0)
    assert ndcg_at(["x"] * 10 + ["b"], relevant) == 0.0  # past the cut-off
    assert ndcg_at(["a"], {}) == 0.0


def test_ndcg_uses_linear_gain_as_trec_eval() -> None:
    """Grades 0-3: the gain is the grade (trec_eval, pytrec_eval, BEIR), not 2^grade - 1."""
    judgments = {"a": 3, "b": 2, "c": 1, "d": 0}
    ranking = ["c", "d", "a", "b"]
    # DCG = 1/log2(2) + 0/log2(3) + 3/log2(4) + 2/log2(5) = 1 + 0 + 1.5 + 0.861353 = 3.361353
    # IDCG = 3/log2(2) + 2/log2(3) + 1/log2(4) = 3 + 1.261860 + 0.5 = 4.761860
    assert ndcg_at(ranking, judgments) == pytest.approx(3.361353 / 4.761860, abs=1e-6)
    assert ndcg_at(ranking, judgments) == pytest.approx(0.705891, abs=1e-6)
    # 2^rel - 1 would give (1 + 3.5 + 1.292030) / (7 + 1.892789 + 0.5) = 0.616646
    assert ndcg_at(ranking, judgments) != pytest.approx(0.616646, abs=1e-3)
    # a document judged not relevant (0, or a negative grade) adds no gain
    assert ndcg_at(["d", "e"], {"d": 0, "e": -1, "a": 1}) == 0.0


def test_recall_and_mrr_by_hand() -> None:
    relevant = {"a": 1, "b": 1, "c": 1, "d": 1}
    ranking = ["x", "a", "y", "b"] + [f"z{i}" for i in range(8)] + ["c"]
    assert recall_at(ranking, relevant, 10) == 0.5
    assert recall_at(ranking, relevant, 100) == 0.75
    assert mrr_at(ranking, relevant) == 0.5
    assert mrr_at(["x"] * 10 + ["a"], relevant) == 0.0


def test_recall_and_mrr_count_only_documents_judged_relevant() -> None:
    judgments = {"a": 2, "b": 1, "n": 0}
    assert recall_at(["n", "a"], judgments, 10) == 0.5  # n is judged, not relevant
    assert mrr_at(["n", "a"], judgments) == 0.5
    assert recall_at(["n"], {"n": 0}, 10) == 0.0
    assert mrr_at(["n"], {"n": 0}) == 0.0


def test_mean_ndcg_and_recall_over_the_judged_queries() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1, "c": 1}}
    # q1: a first; q2: only c, at rank 2; a judged query left unranked scores 0
    ndcg, recall = mean_ndcg_and_recall({"q1": ["a"], "q2": ["x", "c"]}, qrels)
    assert ndcg == pytest.approx((1.0 + (1 / math.log2(3)) / (1 + 1 / math.log2(3))) / 2)
    assert recall == pytest.approx((1.0 + 0.5) / 2)
    assert mean_ndcg_and_recall({}, qrels) == (0.0, 0.0)


def test_eval_help_names_the_gain() -> None:
    done = docingest(["eval", "--help"], url="http://127.0.0.1:9")
    assert done.returncode == 0, done.stderr
    assert "linear gain, as trec_eval" in " ".join(done.stdout.split())


def test_variants_send_rerank_only_when_asked() -> None:
    assert [v.name for v in variants(["vector", "hybrid"], rerank=False)] == ["vector", "hybrid"]
    assert all(v.rerank is None for v in variants(["hybrid"], rerank=False))
    assert [v.name for v in variants(["hybrid"], rerank=True)] == [
        "hybrid-rerank",
        "hybrid+rerank",
    ]
    assert Variant("keyword", True).name == "keyword+rerank"


# --- the BEIR reader -----------------------------------------------------------------------

CORPUS = {
    "101": ("Lunar regolith", "Moon dust is abrasive and sticks to spacesuits."),
    "102": ("Tidal locking", "The Moon always shows Earth the same face."),
    "201": ("Sourdough starters", "Wild yeast and lactobacilli leaven sourdough bread."),
    "202": ("Bread crust", "Maillard reactions brown the crust of baked bread."),
    "301": ("Glacier retreat", "Alpine glaciers lose ice mass as summers warm."),
    "302": ("Sea ice", "Arctic sea ice extent shrinks each September minimum."),
}
QUERIES = {
    "q1": "why does moon dust stick to spacesuits",
    "q2": "what leavens sourdough bread",
    "q3": "arctic sea ice minimum in september",
    "q4": "unjudged query",
}
QRELS = "query-id\tcorpus-id\tscore\nq1\t101\t1\nq2\t201\t2\nq2\t202\t1\nq3\t302\t1\nq3\t999\t0\n"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("beir")
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(QRELS)
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items())
    )
    (folder / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": d, "title": title, "text": text}) + "\n"
            for d, (title, text) in CORPUS.items()
        )
    )
    return folder


def test_reading_a_beir_folder(dataset: Path) -> None:
    test = beir.load_test_set(dataset)
    assert set(test.queries) == {"q1", "q2", "q3"}  # judged queries only
    assert test.qrels["q2"] == {"201": 2, "202": 1}
    assert test.qrels["q3"] == {"302": 1}  # a 0 judgment is not relevant
    records = list(beir.read_corpus(dataset / "corpus.jsonl"))
    assert [r["_id"] for r in records] == list(CORPUS)  # in file order
    assert records[0]["title"] == "Lunar regolith"
    assert beir.corpus_text({"_id": "1", "title": "T", "text": "body"}) == "T\n\nbody\n"
    assert beir.corpus_text({"_id": "1", "text": "body"}) == "body\n"


def test_a_broken_beir_folder_says_where(tmp_path: Path) -> None:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\t1\tmany\n")
    with pytest.raises(ValueError, match="test.tsv:2"):
        beir.load_test_set(tmp_path)
    (tmp_path / "qrels" / "test.tsv").write_text("q9\t1\t1\n")
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n')
    with pytest.raises(ValueError, match="not in queries.jsonl"):
        beir.load_test_set(tmp_path)
    (tmp_path / "corpus.jsonl").write_text('{"_id": "1", "text": "x"}\n\n{"text": "no id"}\n')
    with pytest.raises(ValueError, match="corpus.jsonl:3"):
        list(beir.read_corpus(tmp_path / "corpus.jsonl"))


# --- the command against a real service ---------------------------------------------------


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceEnv]:
    env = ServiceEnv(data_dir=tmp_path_factory.mktemp("eval-serve"))
    with running_serve(env):
        yield env


def test_eval_ingests_resumably_and_reports_every_mode(service: ServiceEnv, dataset: Path) -> None:
    url = service.base_url
    partial = dataset.parent / "partial.jsonl"
    partial.write_text("".join((dataset / "corpus.jsonl").read_text().splitlines(True)[:2]))
    first = docingest(
        ["eval", str(dataset), "--index", "beir", "--ingest", str(partial), "--json"],
        url=url,
        api_key=None,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    assert json.loads(first.stdout)["ingest"]["uploaded"] == 2
    result = docingest(
        ["eval", str(dataset), "--index", "beir", "--ingest", str(dataset / "corpus.jsonl"),
         "--json", "--baseline", "keyword"],
        url=url,
        api_key=None,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ingest"] == {**report["ingest"], "uploaded": 4, "skipped": 2, "failed": 0}
    documents = httpx.get(f"{url}/v1/indexes/beir/documents").json()["documents"]
    assert {d["document_id"] for d in documents} == set(CORPUS)
    titles = {d["document_id"]: d["metadata"].get("title") for d in documents}
    assert titles == {d: title for d, (title, _text) in CORPUS.items()}  # contextual headers
    assert report["queries"] == 3
    by_name = {v["variant"]: v for v in report["variants"]}
    assert set(by_name) == {"vector", "keyword", "hybrid"}
    for variant in by_name.values():
        for metric in ("ndcg@10", "recall@10", "recall@100", "mrr@10"):
            assert 0.0 <= variant[metric] <= 1.0
        assert variant["latency_ms"]["p50"] > 0
        assert variant["reranked_queries"] == 0
    # six documents, all returned: every relevant one is within the top 10
    assert all(v["recall@10"] == 1.0 for v in by_name.values())
    keyword = by_name["keyword"]
    assert keyword["mrr@10"] == 1.0  # each query's words name its document first
    assert keyword["wins"] == keyword["losses"] == 0  # the baseline against itself

    table = docingest(["eval", str(dataset), "--index", "beir", "--modes", "keyword"], url=url,
                      api_key=None)  # fmt: skip
    assert table.returncode == 0, table.stderr
    assert "nDCG@10" in table.stdout and "keyword" in table.stdout


def test_eval_refuses_what_it_cannot_run(service: ServiceEnv, dataset: Path) -> None:
    url = service.base_url
    bad_mode = docingest(["eval", str(dataset), "--index", "beir", "--modes", "fuzzy"], url=url,
                         api_key=None)  # fmt: skip
    assert bad_mode.returncode == 2 and "--modes" in bad_mode.stderr
    missing = docingest(["eval", str(dataset), "--index", "nowhere"], url=url, api_key=None)
    assert missing.returncode == 1 and "index_not_found" in missing.stderr
    no_set = docingest(["eval", str(dataset / "nothing"), "--index", "beir"], url=url, api_key=None)
    assert no_set.returncode == 2


def test_eval_rerank_without_a_reranker_refuses(service: ServiceEnv, dataset: Path) -> None:
    """The service has no re-ranker: "+rerank" rows would equal the others, so say so."""
    url = service.base_url
    docingest(["eval", str(dataset), "--index", "beir", "--ingest", str(dataset / "corpus.jsonl")],
              url=url, api_key=None)  # fmt: skip
    result = docingest(["eval", str(dataset), "--index", "beir", "--rerank", "--json"], url=url,
                       api_key=None)  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--rerank" in result.stderr and "rerank_not_configured" in result.stderr
    assert result.stdout == ""  # no report of rows that mean nothing


def test_a_rerank_variant_that_reranked_nothing_is_named() -> None:
    results = [VariantResult(Variant("hybrid", False)), VariantResult(Variant("hybrid", True))]
    assert unreranked(results, 3) == ["hybrid+rerank"]
    results[1].reranked = 3
    assert unreranked(results, 3) == []
