"""End to end through one real `docingest serve`: the formats of issue 16 (slide decks,
workbooks, CSV, e-books, OpenDocument text, e-mail), each found by a passage from its middle
with its slide, sheet, chapter or attachment in the chunk's headings."""

from __future__ import annotations

import re

import pytest

from tests.support.http_client import ApiClient, Json
from tests.support.paths import CORPUS_DIR

INDEX = "more-formats"
FILES = {
    "pptx": CORPUS_DIR / "pptx" / "simple.pptx",
    "xlsx": CORPUS_DIR / "xlsx" / "2023-half-year-analyses-by-segment.xlsx",
    "csv": CORPUS_DIR / "csv" / "stanley-cups.tsv",
    "epub": CORPUS_DIR / "epub" / "winter-sports.epub",
    "odt": CORPUS_DIR / "odt" / "simple.odt",
    "eml": CORPUS_DIR / "eml" / "fake-email-attachment.eml",
}
PASSAGES = [
    # (format, keyword query, hybrid query, phrase in the chunk, headings, page)
    ("pptx", "flowers gone", "where did all the flowers go",
     "Where have all the flowers gone?", ["Things to think about"], 2),
    ("xlsx", "PetCare 9373", "PetCare sales in millions of CHF",
     "In millions of CHF: PetCare; B: 9373;", ["Prod.Rev.and results 30 06 2023"], None),
    ("csv", "Flyers PHI", "How many Stanley Cups have the Flyers won",
     "Team: Flyers; Location: PHI; Stanley Cups: 2", [], None),
    ("epub", "mohawks choctaws", "skating turns known as mohawks and choctaws",
     "These are known as mohawks and choctaws",
     ["WINTER SPORTS IN SWITZERLAND", "CHAPTER II RINKS AND SKATERS"], None),
    ("odt", "third thought", "my third thought",
     "This is my third thought.", ["These are a few of my favorite things:"], None),
    ("eml", "fake attachment", "a fake attachment to the e-mail",
     "Hey this is a fake attachment!", ["fake-attachment.txt"], None),
]  # fmt: skip


# Larger chunks than the default: the e-book is 434 chunks of 1,000 characters, which the
# local model embeds in minutes on a loaded 2-core machine; the headings do not change.
CHUNKING = {"chunk_size": 4000, "chunk_overlap": 200, "unit": "chars"}


@pytest.fixture(scope="module")
def jobs(api: ApiClient) -> dict[str, Json]:
    """Upload one file of each format into one index and wait for every job."""
    created = api.http.put(f"/v1/indexes/{INDEX}", json={"chunking": CHUNKING})
    assert created.status_code == 201, created.text
    submitted = {fmt: api.submit(INDEX, path) for fmt, path in FILES.items()}
    return {fmt: api.wait(job_id, timeout=600) for fmt, job_id in submitted.items()}


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def test_every_new_format_completes(jobs: dict[str, Json]) -> None:
    for fmt, job in jobs.items():
        assert job["status"] == "completed", job
        result = job["result"]
        assert result["format"] == fmt
        assert result["chunks"] >= 1 and result["words"] > 0
    assert jobs["pptx"]["result"]["pages"] == 2  # slides are pages


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize(
    ("fmt", "keyword_query", "hybrid_query", "phrase", "headings", "page"),
    PASSAGES,
    ids=[passage[0] for passage in PASSAGES],
)
def test_a_passage_is_found_with_its_section_in_the_headings(
    jobs: dict[str, Json],
    api: ApiClient,
    mode: str,
    fmt: str,
    keyword_query: str,
    hybrid_query: str,
    phrase: str,
    headings: list[str],
    page: int | None,
) -> None:
    assert jobs[fmt]["status"] == "completed", jobs[fmt]
    query = keyword_query if mode == "keyword" else hybrid_query
    results = api.search(INDEX, query, top_k=5, mode=mode)
    assert results, f"nothing found for {query!r}"
    assert results[0]["document_id"] == FILES[fmt].name, [r["document_id"] for r in results]
    hits = [r for r in results if squash(phrase) in squash(r["text"])]
    assert hits, f"no result holds {phrase!r}: {[r['text'][:80] for r in results]}"
    hit = hits[0]
    assert hit["format"] == fmt
    assert hit["headings"] == headings
    assert (hit["page_start"], hit["page_end"]) == (page, page)
