"""`docingest.Client` and `AsyncClient` against a real `docingest serve`: upload from a path,
bytes and a stream, `wait` with the service's own stage and counters, typed search results,
listings walked page by page, and the contract's errors as exceptions."""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import Iterator

import pytest

import docingest
from docingest._core import Waiter
from docingest.models import Job
from tests.support.docingest_service import ServiceEnv
from tests.support.paths import EXAMPLES_DIR

INDEX = "sdk-client"
DOC = EXAMPLES_DIR / "docling-README.md"
"""Small (8 KB, a few chunks), so a loaded machine ingests it in seconds."""


@pytest.fixture(scope="module")
def client(sdk_serve: ServiceEnv) -> Iterator[docingest.Client]:
    with docingest.Client(sdk_serve.base_url) as client:
        yield client


@pytest.fixture(scope="module")
def progress() -> list[Job]:
    """Every state `wait` reported while the README was ingested."""
    return []


@pytest.fixture(scope="module")
def ingested(client: docingest.Client, progress: list[Job]) -> dict[str, Job]:
    """A README from a path (progress recorded), a note from bytes, a memo from a stream."""
    seen = progress
    jobs = {"doc": client.ingest(INDEX, DOC, metadata={"kind": "readme"}, on_progress=seen.append)}
    jobs["note"] = client.ingest(
        INDEX, b"The notice period is one month.", filename="note.txt", metadata={"kind": "note"}
    )
    memo = io.BufferedReader(io.BytesIO(b"Offsite planning memo: the venue is booked."))
    jobs["memo"] = client.ingest(INDEX, memo, filename="memo.txt", document_id="memos/offsite")
    jobs["first"] = seen[0]
    return jobs


def test_uploads_from_a_path_bytes_and_a_stream_complete(
    client: docingest.Client, ingested: dict[str, Job]
) -> None:
    assert {ingested[name].status for name in ("doc", "note", "memo")} == {"completed"}
    assert ingested["memo"].document_id == "memos/offsite"
    stored = client.get_document(INDEX, "docling-README.md")
    assert stored.content_sha256 == hashlib.sha256(DOC.read_bytes()).hexdigest()
    assert stored.metadata == {"kind": "readme"} and stored.chunks >= 1
    assert client.get_document(INDEX, "memos/offsite").filename == "memo.txt"


def test_wait_reports_the_services_own_stage_and_counters(
    ingested: dict[str, Job], progress: list[Job]
) -> None:
    seen = progress
    fractions = [job.progress for job in seen]
    assert fractions == sorted(fractions), "progress never goes back"
    last = seen[-1]
    assert last.status == "completed" and last.progress == 1.0
    assert last.result is not None and last.result.chunks == last.chunks_done >= 1
    states = [
        (job.status, job.stage, job.progress, job.pages_done, job.chunks_embedded, job.chunks_done)
        for job in seen
    ]
    moved = all(a != b for a, b in zip(states, states[1:], strict=False))
    assert moved, "called only when something moved"


def test_search_returns_typed_results(client: docingest.Client, ingested: dict[str, Job]) -> None:
    response = client.search(
        INDEX, "Which document formats does Docling parse?", top_k=3, mode="hybrid",
        filter={"kind": "readme"}, max_chunks_per_document=3,
    )  # fmt: skip
    assert 0 < len(response.results) <= 3 and response.took_ms >= 0
    hit = response.results[0]
    assert hit.document_id == "docling-README.md" and hit.metadata == {"kind": "readme"}
    assert hit.scores.vector is not None and hit.score > 0
    assert hit.best_text in hit.text
    scores = [result.score for result in response.results]
    assert scores == sorted(scores, reverse=True)


def test_listings_are_walked_page_by_page(
    client: docingest.Client, ingested: dict[str, Job]
) -> None:
    everything = [doc.document_id for doc in client.iter_documents(INDEX, page_size=1)]
    assert sorted(everything) == ["docling-README.md", "memos/offsite", "note.txt"]
    jobs = list(client.iter_jobs(index=INDEX))
    assert {job.job_id for job in jobs} >= {ingested[n].job_id for n in ("doc", "note", "memo")}
    first = client.list_documents(INDEX, limit=1)
    if first.next_cursor is not None:  # a v1.2 server pages; a v1.1 one answers all at once
        assert len(first.documents) == 1
    assert [i.name for i in client.list_indexes() if i.name == INDEX] == [INDEX]


def test_errors_carry_the_contracts_codes(client: docingest.Client) -> None:
    with pytest.raises(docingest.JobNotFound) as raised:
        client.get_job("0" * 32)
    assert raised.value.status == 404 and raised.value.code == "job_not_found"
    with pytest.raises(docingest.InvalidRequest) as invalid:
        client.create_index("Not A Name")
    assert invalid.value.code == "invalid_index_name"
    with pytest.raises(docingest.InvalidRequest) as empty:
        client.upload(INDEX, b"", filename="empty.txt")
    assert empty.value.status == 400
    with pytest.raises(docingest.JobFailed) as failed:
        client.ingest("sdk-broken", b"%PDF-1.7\n" + bytes(range(256)) * 16, filename="x.pdf")
    assert failed.value.code == "corrupt_document" and failed.value.job.status == "failed"


def test_wait_gives_up_at_its_timeout(ingested: dict[str, Job]) -> None:
    running = ingested["first"].model_copy(update={"status": "processing"})
    waiter = Waiter(timeout=0.0, poll_interval=0.5)
    with pytest.raises(docingest.WaitTimeout) as raised:
        waiter.observe(running)
    assert isinstance(raised.value, TimeoutError) and raised.value.job is running


def test_the_async_client_does_the_same(sdk_serve: ServiceEnv, ingested: dict[str, Job]) -> None:
    async def scenario() -> tuple[str, list[str], str]:
        async with docingest.AsyncClient(sdk_serve.base_url) as client:
            job = await client.ingest(INDEX, b"Async upload about the budget.", filename="a.txt")
            ids = [doc.document_id async for doc in client.iter_documents(INDEX, page_size=2)]
            hits = await client.search(INDEX, "budget", mode="keyword", top_k=1)
            await client.delete_document(INDEX, "a.txt")
            return job.status, ids, hits.results[0].document_id

    status, ids, top = asyncio.run(scenario())
    assert status == "completed" and "a.txt" in ids and top == "a.txt"


def test_delete_documents_by_filter_in_bounded_rounds_or_all(client: docingest.Client) -> None:
    index = "sdk-delete"
    for number in range(3):
        client.ingest(index, f"Delete round {number}.".encode(), filename=f"d{number}.txt",
                      metadata={"kind": "draft" if number else "final"})  # fmt: skip
    with pytest.raises(docingest.DocingestError) as refused:
        client.delete_documents(index, {"document_id": {"exists": True}})  # matches all
    assert refused.value.code == "invalid_filter"
    first = client.delete_documents(index, {"kind": "draft"}, limit=1)
    assert (first.deleted, first.more) == (1, True)
    second = client.delete_documents(index, {"kind": "draft"}, limit=1)
    assert (second.deleted, second.more) == (1, False)
    assert [doc.document_id for doc in client.iter_documents(index)] == ["d0.txt"]
    everything = client.delete_documents(index, all_documents=True)
    assert (everything.deleted, everything.more) == (1, False)
    assert list(client.iter_documents(index)) == []
