"""End to end through one real `docingest serve`: the formats of issue 26 (legacy Word, Excel
and PowerPoint, RTF, OpenDocument spreadsheets and decks, Outlook messages, mbox archives),
each found by a passage from its middle, by keyword and hybrid search, with its heading.

The legacy files are the corpus's ODT, XLSX and PPTX saved by LibreOffice at test time; the
`.msg` and the mbox archive are written here. Each format gets an index of its own, since
a `.doc` and an `.rtf` of one document hold the same passage."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import legacy_files, ole2_files
from tests.support.http_client import ApiClient, Json
from tests.support.paths import CORPUS_DIR

ODT = CORPUS_DIR / "odt" / "simple.odt"
XLSX = CORPUS_DIR / "xlsx" / "2023-half-year-analyses-by-segment.xlsx"
PPTX = CORPUS_DIR / "pptx" / "simple.pptx"
SOURCES = {"doc": ODT, "rtf": ODT, "xls": XLSX, "ods": XLSX, "ppt": PPTX, "odp": PPTX}
ODT_PASSAGE = (
    "third thought",
    "my third thought",
    "This is my third thought.",
    ["These are a few of my favorite things:"],
    None,
)
XLSX_PASSAGE = (
    "PetCare 9373",
    "PetCare sales in millions of CHF",
    "In millions of CHF: PetCare; B: 9373;",
    ["Prod.Rev.and results 30 06 2023"],
    None,
)
PPTX_PASSAGE = (
    "flowers gone",
    "where did all the flowers go",
    "Where have all the flowers gone?",
    ["Things to think about"],
    2,
)
PASSAGES = {
    # format: (keyword query, hybrid query, phrase in the chunk, headings, page)
    "doc": ODT_PASSAGE, "rtf": ODT_PASSAGE, "xls": XLSX_PASSAGE, "ods": XLSX_PASSAGE,
    "ppt": PPTX_PASSAGE, "odp": PPTX_PASSAGE,
    "msg": ("turbine overhaul", "when is the turbine being overhauled",
            "The turbine overhaul starts on 4 March.", ["turbine-notes.txt"], None),
    "mbox": ("budget freeze", "is the budget frozen this quarter",
             "The budget freeze holds until the audit ends.", ["Budget review"], 2),
}  # fmt: skip
CHUNKING = {"chunk_size": 4000, "chunk_overlap": 200, "unit": "chars"}


def _mbox() -> bytes:
    messages = [
        ("Kick-off", "Welcome to the project. The first milestone is in May."),
        ("Budget review", "Finance met on Tuesday.\n\nThe budget freeze holds until the audit "
                          "ends.\n\nNew hires wait until then."),
        ("Wrap-up", "Thanks all; minutes follow."),
    ]  # fmt: skip
    out = b""
    for number, (subject, body) in enumerate(messages, 1):
        out += (
            f"From pm@example.org Mon Jan  {number} 09:00:00 2024\nFrom: pm@example.org\n"
            f"To: team@example.org\nSubject: {subject}\n"
            f"Date: Mon, {number} Jan 2024 09:00:00 +0000\n\n{body}\n\n"
        ).encode()
    return out


def _files(directory: Path) -> dict[str, Path]:
    files = {fmt: legacy_files.convert(source, fmt, directory) for fmt, source in SOURCES.items()}
    notes = b"Plant notes.\n\nThe turbine overhaul starts on 4 March.\n\nCall the vendor first.\n"
    msg = directory / "plant-update.msg"
    msg.write_bytes(ole2_files.msg(
        subject="Plant update", body="Notes attached.", attachments=[("turbine-notes.txt", notes)]
    ))  # fmt: skip
    mbox = directory / "project.mbox"
    mbox.write_bytes(_mbox())
    return {**files, "msg": msg, "mbox": mbox}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _files(tmp_path_factory.mktemp("legacy-e2e"))


@pytest.fixture(scope="module")
def jobs(api: ApiClient, files: dict[str, Path]) -> dict[str, Json]:
    """Upload each file into an index of its own and wait for every job."""
    submitted = {}
    for fmt, path in files.items():
        created = api.http.put(f"/v1/indexes/legacy-{fmt}", json={"chunking": CHUNKING})
        assert created.status_code == 201, created.text
        submitted[fmt] = api.submit(f"legacy-{fmt}", path)
    return {fmt: api.wait(job_id, timeout=900) for fmt, job_id in submitted.items()}


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def test_every_legacy_format_completes(jobs: dict[str, Json]) -> None:
    for fmt, job in jobs.items():
        assert job["status"] == "completed", job
        assert job["result"]["format"] == fmt
        assert job["result"]["chunks"] >= 1 and job["result"]["words"] > 0
    assert jobs["ppt"]["result"]["pages"] == jobs["odp"]["result"]["pages"] == 2
    assert jobs["mbox"]["result"]["pages"] == 3  # a page per message


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize("fmt", list(PASSAGES))
def test_a_passage_is_found_with_its_heading(
    jobs: dict[str, Json], files: dict[str, Path], api: ApiClient, mode: str, fmt: str
) -> None:
    keyword_query, hybrid_query, phrase, headings, page = PASSAGES[fmt]
    assert jobs[fmt]["status"] == "completed", jobs[fmt]
    query = keyword_query if mode == "keyword" else hybrid_query
    results = api.search(f"legacy-{fmt}", query, top_k=5, mode=mode)
    assert results, f"nothing found for {query!r}"
    assert results[0]["document_id"] == files[fmt].name
    hits = [r for r in results if squash(phrase) in squash(r["text"])]
    assert hits, f"no result holds {phrase!r}: {[r['text'][:80] for r in results]}"
    assert hits[0]["format"] == fmt
    assert hits[0]["headings"] == headings
    assert (hits[0]["page_start"], hits[0]["page_end"]) == (page, page)
