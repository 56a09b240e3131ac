"""End to end through one real `docingest serve`: ingest every format, search, progress,
replace-on-reingest, metadata filters and deletes, all over HTTP."""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path

import pypdf
import pytest

from docingest.pipeline.keys import TERMINAL_STATUSES
from tests.support.http_client import JOB_TIMEOUT, ApiClient, Json, assert_error
from tests.support.paths import CORPUS_DIR, EXAMPLES_DIR

FORMATS_INDEX = "formats"
PDF = EXAMPLES_DIR / "federal-register-2020-17221.pdf"
FILES = {
    "pdf": PDF,
    "docx": EXAMPLES_DIR / "tika-sample-word-document.docx",
    "html": EXAMPLES_DIR / "python311-tutorial-introduction.html",
    "markdown": EXAMPLES_DIR / "docling-README.md",
    "txt": CORPUS_DIR / "txt" / "python311-library-csv.rst.txt",
}
STAGE_ORDER = ["detecting", "extracting", "chunking", "embedding", "storing"]
RESULT_FIELDS = {
    "document_id", "chunk_index", "text", "score", "scores", "filename", "format",
    "page_start", "page_end", "headings", "metadata", "ocr",
    # v1.2: offsets, the excerpt and highlights; context and explain when asked (else null).
    "start", "end", "excerpt", "highlights", "context", "explain",
    # After v1.3: the header row of the table a chunk continues (null when none).
    "table_header",
}  # fmt: skip


@dataclass
class Ingested:
    jobs: dict[str, Json]
    """The finished job of each format."""
    pdf_trace: list[Json]
    """Every state of the PDF job seen while polling it fast, from queued to completed."""


@pytest.fixture(scope="module")
def ingested(api: ApiClient) -> Ingested:
    """Upload one document of each format into one index; poll the PDF closely meanwhile."""
    pdf_job = api.submit(FORMATS_INDEX, PDF)
    others = {fmt: api.submit(FORMATS_INDEX, path) for fmt, path in FILES.items() if fmt != "pdf"}
    trace: list[Json] = []
    deadline = time.monotonic() + JOB_TIMEOUT
    while not trace or trace[-1]["status"] not in TERMINAL_STATUSES:
        assert time.monotonic() < deadline, trace[-1]
        trace.append(api.job(pdf_job))
        time.sleep(0.02)
    jobs = {"pdf": trace[-1]} | {fmt: api.wait(job_id) for fmt, job_id in others.items()}
    return Ingested(jobs=jobs, pdf_trace=trace)


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def pdf_pages_with(path: Path, phrase: str) -> list[int]:
    """1-based numbers of the pages whose text (by pypdf, independently of docingest) has it."""
    pages = pypdf.PdfReader(path).pages
    return [n for n, page in enumerate(pages, 1) if squash(phrase) in squash(page.extract_text())]


def test_every_format_completes_with_its_result(ingested: Ingested, api: ApiClient) -> None:
    for fmt, job in ingested.jobs.items():
        assert job["status"] == "completed", job
        assert job["error"] is None
        assert job["progress"] == 1.0
        assert job["attempts"] == 1
        assert job["finished_at"] and job["started_at"] and job["created_at"]
        result = job["result"]
        assert result["document_id"] == FILES[fmt].name
        assert result["format"] == fmt
        assert result["version"] == 1
        assert result["chunks"] >= 1 and result["words"] > 0
        assert result["unchanged"] is False and result["chunks_reused"] == 0
    assert ingested.jobs["pdf"]["result"]["pages"] == len(pypdf.PdfReader(PDF).pages)

    documents = {doc["document_id"]: doc for doc in api.documents(FORMATS_INDEX)}
    assert set(documents) == {path.name for path in FILES.values()}
    for fmt, path in FILES.items():
        doc = documents[path.name]
        assert doc["format"] == fmt
        assert doc["version"] == 1
        assert doc["chunks"] == ingested.jobs[fmt]["result"]["chunks"]
        assert doc["content_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    info = api.http.get(f"/v1/indexes/{FORMATS_INDEX}").json()
    assert info["documents"] == len(FILES)
    assert info["chunks"] == sum(job["result"]["chunks"] for job in ingested.jobs.values())


PASSAGES = [
    # (format, query, phrase in the chunk, page, heading path)
    ("pdf", "Stabilizer Out of Trim checklist when the autopilot does not",
     "Stabilizer Out of Trim checklist", 4, None),
    ("markdown", "parsing video files with an ASR transcript and keyframes",
     "Parsing of video files", None, ["Docling", "Features", "What's new"]),
    ("html", "floor division and the remainder operator",
     "floor division", None,
     ["3. An Informal Introduction to Python", "3.1. Using Python as a Calculator",
      "3.1.1. Numbers"]),
    ("docx", "sample Microsoft Word document with bold and italic text",
     "This is a sample Microsoft Word Document", None, None),
    ("txt", "Sniffer class deduces the format of a CSV file",
     "class is used to deduce the format of a CSV file", None, None),
]  # fmt: skip


@pytest.mark.parametrize(("fmt", "query", "phrase", "page", "headings"), PASSAGES)
def test_search_finds_a_known_passage(
    ingested: Ingested,
    api: ApiClient,
    fmt: str,
    query: str,
    phrase: str,
    page: int | None,
    headings: list[str] | None,
) -> None:
    assert ingested.jobs[fmt]["status"] == "completed"
    results = api.search(FORMATS_INDEX, query, top_k=5)
    assert results[0]["document_id"] == FILES[fmt].name, [r["document_id"] for r in results]
    hits = [r for r in results if squash(phrase) in squash(r["text"])]
    assert hits, f"no result holds {phrase!r}: {[r['text'][:80] for r in results]}"
    hit = hits[0]
    assert hit["document_id"] == FILES[fmt].name
    assert hit["filename"] == FILES[fmt].name
    assert hit["format"] == fmt
    if page is not None:
        assert pdf_pages_with(FILES[fmt], phrase) == [page]  # the passage is on that page only
        assert hit["page_start"] <= page <= hit["page_end"], hit
    else:
        assert hit["page_start"] is None and hit["page_end"] is None
    if headings is not None:
        assert hit["headings"] == headings


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
def test_results_carry_the_contract_fields(ingested: Ingested, api: ApiClient, mode: str) -> None:
    results = api.search(FORMATS_INDEX, "reading and writing CSV files", top_k=8, mode=mode)
    assert len(results) == 8
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    names = {path.name: fmt for fmt, path in FILES.items()}
    for result in results:
        assert set(result) == RESULT_FIELDS
        assert set(result["scores"]) == {"vector", "keyword", "rerank"}
        assert result["scores"]["rerank"] is None  # no rerank stage on this index
        vector, keyword = result["scores"]["vector"], result["scores"]["keyword"]
        if mode == "vector":
            assert isinstance(vector, float) and keyword is None
            assert result["score"] == pytest.approx(vector)
            assert -1.0 <= vector <= 1.0
        elif mode == "keyword":
            assert isinstance(keyword, float) and vector is None
            assert result["score"] == pytest.approx(keyword)
            assert keyword > 0
        else:
            assert vector is not None or keyword is not None
            assert 0 <= result["score"] <= 1  # a convex combination of scores scaled to 0-1
        assert result["document_id"] in names
        assert result["filename"] == result["document_id"]
        assert result["format"] == names[result["document_id"]]
        assert isinstance(result["chunk_index"], int) and result["chunk_index"] >= 0
        assert result["text"].strip()
        assert isinstance(result["headings"], list)
        assert result["metadata"] == {}
        if result["format"] == "pdf":
            assert 1 <= result["page_start"] <= result["page_end"]
    if mode == "hybrid":  # fused from both retrievers: some chunk was found by both
        assert any(r["scores"]["vector"] and r["scores"]["keyword"] for r in results)


def test_progress_advances_through_the_stages(ingested: Ingested) -> None:
    trace = ingested.pdf_trace
    final = trace[-1]
    assert final["status"] == "completed", final
    assert final["progress"] == 1.0
    result = final["result"]
    assert final["pages_total"] == final["pages_done"] == result["pages"] == 15
    assert final["chunks_total"] == final["chunks_done"] == result["chunks"]

    statuses = [state["status"] for state in trace]
    assert "processing" in statuses
    assert statuses == sorted(statuses, key=["queued", "processing", "completed"].index)
    progress = [state["progress"] for state in trace]
    assert progress == sorted(progress), progress
    assert all(0.0 <= value <= 1.0 for value in progress)
    assert 1.0 not in progress[:-1]  # exactly 1.0 only once completed
    assert len({value for value in progress if 0 < value < 1}) >= 3, progress
    for field in ("pages_done", "chunks_done", "chunks_embedded"):
        counts = [state[field] for state in trace]
        assert counts == sorted(counts), (field, counts)

    stages = [state["stage"] for state in trace if state["stage"] is not None]
    seen = list(dict.fromkeys(stages))
    assert "embedding" in seen, seen
    assert seen == sorted(seen, key=STAGE_ORDER.index), seen
    ranks = [STAGE_ORDER.index(stage) for stage in stages]
    assert ranks == sorted(ranks), stages  # never back to an earlier stage
    embedding = [(s["progress"], s["chunks_embedded"]) for s in trace if s["stage"] == "embedding"]
    assert len(set(embedding)) >= 2, embedding  # seen moving within the embedding stage


def notes(budget: str) -> bytes:
    """A Markdown document of three sections; only the first one varies."""
    return (
        "# Field notes\n\n"
        f"## Budget\n\n{budget}\n\n"
        "## Schedule\n\nWork starts in the second week of March and ends before the summer "
        "opening.\n\n"
        "## Contacts\n\nQuestions about the project go to the facilities office on the ground "
        "floor.\n"
    ).encode()


def test_reupload_replaces_the_document(api: ApiClient) -> None:
    index, doc = "reingest", "field-notes"
    old = notes("The quarterly budget for the aquarium renovation is four hundred dollars.")
    new = notes("The yearly budget for the observatory telescope is nine thousand dollars.")
    first = api.ingest(index, old, filename="notes.md", document_id=doc)["result"]
    assert first["version"] == 1 and first["chunks"] == 3
    assert api.search(index, "aquarium renovation", mode="keyword")[0]["document_id"] == doc

    second = api.ingest(index, new, filename="notes.md", document_id=doc)["result"]
    assert second["version"] == 2
    assert second["unchanged"] is False
    assert second["chunks"] == 3
    assert second["chunks_reused"] == 2  # the two unchanged sections kept their vectors
    assert api.search(index, "aquarium renovation", mode="keyword") == []
    for mode in ("vector", "hybrid"):
        texts = [r["text"] for r in api.search(index, "aquarium renovation", mode=mode)]
        assert texts and not any("aquarium" in text for text in texts)
    hit = api.search(index, "observatory telescope budget")[0]
    assert hit["document_id"] == doc and "telescope" in hit["text"]
    assert hit["headings"] == ["Field notes", "Budget"]
    documents = api.documents(index)
    assert [(d["document_id"], d["version"]) for d in documents] == [(doc, 2)]
    assert documents[0]["content_sha256"] == hashlib.sha256(new).hexdigest()

    same = api.ingest(index, new, filename="notes.md", document_id=doc)["result"]
    assert same["unchanged"] is True
    assert same["version"] == 2 and same["chunks"] == 3
    assert same["chunks_reused"] == 0  # nothing was embedded or written again
    assert api.documents(index) == documents  # same version, same ingested_at: not rewritten

    forced = api.ingest(index, new, filename="notes.md", document_id=doc, force=True)["result"]
    assert forced["unchanged"] is False
    assert forced["version"] > same["version"]  # versions grow; they need not be contiguous
    assert forced["chunks_reused"] == 0
    assert [(d["document_id"], d["version"]) for d in api.documents(index)] == [
        (doc, forced["version"])
    ]
    assert api.http.get(f"/v1/indexes/{index}").json()["chunks"] == 3


def test_metadata_filter(api: ApiClient) -> None:
    index = "filtered"
    legal = {"department": "legal", "tags": ["a", "b"]}
    api.ingest(index, FILES["docx"], document_id="legal-doc", metadata=legal)
    api.ingest(index, FILES["docx"], document_id="finance-doc", metadata={"department": "finance"})
    query = "sample Microsoft Word document"

    unfiltered = {r["document_id"] for r in api.search(index, query)}
    assert unfiltered == {"legal-doc", "finance-doc"}
    for condition in ({"department": "legal"}, {"tags": ["a"]}, {"tags": ["b", "zzz"]}):
        results = api.search(index, query, filter=condition)
        assert [r["document_id"] for r in results] == ["legal-doc"], condition
        assert results[0]["metadata"] == legal
    assert api.search(index, query, filter={"department": "hr"}) == []
    assert api.search(index, query, filter={"department": "legal", "tags": ["c"]}) == []
    by_id = api.search(index, query, filter={"document_id": "finance-doc"})
    assert [r["document_id"] for r in by_id] == ["finance-doc"]
    assert {d["document_id"]: d["metadata"] for d in api.documents(index)} == {
        "legal-doc": legal,
        "finance-doc": {"department": "finance"},
    }


def test_delete_document_then_index(api: ApiClient) -> None:
    index = "deleting"
    doc = "field-notes.md"
    api.ingest(index, notes("Docling converts documents."), filename=doc)
    api.ingest(index, FILES["docx"])
    assert api.search(index, "Docling", mode="keyword")[0]["document_id"] == doc

    response = api.http.delete(f"/v1/indexes/{index}/documents/{doc}")
    assert response.status_code == 204 and response.content == b""
    assert [d["document_id"] for d in api.documents(index)] == [FILES["docx"].name]
    assert api.search(index, "Docling", mode="keyword") == []
    assert all(r["document_id"] != doc for r in api.search(index, "Docling", mode="vector"))
    assert_error(api.http.get(f"/v1/indexes/{index}/documents/{doc}"), 404, "document_not_found")
    again = api.http.delete(f"/v1/indexes/{index}/documents/{doc}")
    assert_error(again, 404, "document_not_found")

    response = api.http.delete(f"/v1/indexes/{index}")
    assert response.status_code == 204 and response.content == b""
    assert_error(api.http.get(f"/v1/indexes/{index}"), 404, "index_not_found")
    names = [i["name"] for i in api.http.get("/v1/indexes").json()["indexes"]]
    assert index not in names
    response = api.http.post(f"/v1/indexes/{index}/search", json={"query": "Docling"})
    assert_error(response, 404, "index_not_found")
    assert_error(api.http.delete(f"/v1/indexes/{index}"), 404, "index_not_found")
