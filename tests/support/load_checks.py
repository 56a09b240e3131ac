"""What a load run (`load.run_load`) must have left behind, checked from outside.

Through the API, while the service runs: every upload answered 202 with a job id of its own;
every job is known (not lost) and ended; a failed job carries a code, and the only expected one
is `superseded` (a newer upload of the same document was handed out while it ran); every
completed job has a result, a recorded attempt count within the limit, and was counted finished
once (the `docingest_jobs_finished_total` counter equals the jobs seen completed); the index
lists exactly the document ids that completed at least once, each at the newest version a job
published, with that upload's bytes and chunk count; the index's document and chunk totals
agree; every search answered 200, never held the same chunk of one document twice, nor chunks
of two versions of one document (a re-upload carries other content under another filename, so
one document with two filenames in one answer is two versions).

In the store, once the service has stopped: each document has points of its live version only,
as many as its chunks, and the index holds no other point (nothing staged or left over from a
superseded or replaced version).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from docingest.pipeline.settings import Settings
from docingest.pipeline.store import VectorStore
from tests.support.load import Json, LoadRun, Upload

EXPECTED_FAILURES = {"superseded"}
"""Codes a job may fail with in a clean load, and only when its document was uploaded again."""


@dataclass
class Findings:
    """Counts of a load run and every violation found, by kind."""

    uploads: int = 0
    completed: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    attempts: Counter[int] = field(default_factory=Counter)
    documents: int = 0
    chunks: int = 0
    lost: list[str] = field(default_factory=list)
    not_ended: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    search_errors: list[str] = field(default_factory=list)

    @property
    def violations(self) -> list[str]:
        return [
            *(f"lost: job {job_id} is unknown to the API" for job_id in self.lost),
            *(f"not ended: job {job_id}" for job_id in self.not_ended),
            *(f"duplicated: {what}" for what in self.duplicated),
            *(f"unexpected: {what}" for what in self.unexpected),
            *(f"search: {what}" for what in self.search_errors),
        ]


def check_api(client: httpx.Client, run: LoadRun, *, max_attempts: int) -> Findings:
    """Check the jobs, documents, index totals and searches of `run` through the API."""
    found = Findings(uploads=len(run.sent))
    uploads: dict[str, Upload] = {}
    for sent in run.sent:
        if sent.job_id is None:
            found.unexpected.append(f"upload {sent.upload.number}: {sent.status} {sent.detail}")
        elif sent.job_id in uploads:
            found.duplicated.append(f"job id {sent.job_id} answered two uploads")
        else:
            uploads[sent.job_id] = sent.upload
    sent_per_document = Counter(upload.document_id for upload in uploads.values())
    completed = _check_jobs(
        found, run, uploads, sent_per_document=sent_per_document, max_attempts=max_attempts
    )
    finished = _finished_counter(client, "completed")
    if finished != found.completed:
        found.duplicated.append(f"{finished} jobs counted completed, {found.completed} seen")
    _check_documents(found, client, run.index, completed)
    _check_searches(found, run, {upload.document_id for upload in uploads.values()})
    return found


def _check_jobs(
    found: Findings,
    run: LoadRun,
    uploads: dict[str, Upload],
    *,
    sent_per_document: Counter[str],
    max_attempts: int,
) -> dict[str, list[tuple[Json, Upload]]]:
    """Classify every job; return the completed ones by document id."""
    completed: dict[str, list[tuple[Json, Upload]]] = defaultdict(list)
    for job_id, upload in uploads.items():
        job = run.jobs.get(job_id)
        if job is None:
            found.lost.append(job_id)
            continue
        found.attempts[job["attempts"]] += 1
        if (job["index"], job["document_id"]) != (run.index, upload.document_id):
            found.unexpected.append(f"job {job_id} is not of upload {upload.number}: {job}")
        if not 1 <= job["attempts"] <= max_attempts:
            found.unexpected.append(
                f"job {job_id} {job['status']} after {job['attempts']} attempts"
            )
        if job["status"] == "completed":
            result = job["result"]
            if not result or result["document_id"] != upload.document_id:
                found.unexpected.append(f"job {job_id} completed with result {result}")
                continue
            found.completed += 1
            completed[upload.document_id].append((job, upload))
        elif job["status"] == "failed":
            code = (job["error"] or {}).get("code")
            found.failed[code or "(no code)"] += 1
            again = sent_per_document[upload.document_id] > 1
            if code not in EXPECTED_FAILURES or not again:
                found.unexpected.append(f"job {job_id} ({upload.filename}) failed: {job['error']}")
        elif job["status"] == "cancelled":
            found.unexpected.append(f"job {job_id} was cancelled; nobody cancelled it")
        else:
            found.not_ended.append(job_id)
    return completed


def _finished_counter(client: httpx.Client, status: str) -> int:
    text = client.get("/metrics").raise_for_status().text
    pattern = rf'^docingest_jobs_finished_total\{{status="{status}"\}} (\S+)$'
    match = re.search(pattern, text, flags=re.MULTILINE)
    return int(float(match.group(1))) if match else 0


def _check_documents(
    found: Findings,
    client: httpx.Client,
    index: str,
    completed: dict[str, list[tuple[Json, Upload]]],
) -> None:
    listed = client.get(f"/v1/indexes/{index}/documents").raise_for_status().json()["documents"]
    ids = Counter(document["document_id"] for document in listed)
    found.duplicated += [f"document {d} listed {n} times" for d, n in ids.items() if n > 1]
    extra, missing = ids.keys() - completed.keys(), completed.keys() - ids.keys()
    found.unexpected += [f"document {d} listed, but no job of it completed" for d in extra]
    found.unexpected += [f"document {d} completed, but is not listed" for d in missing]
    for document in listed:
        jobs = completed.get(document["document_id"], [])
        if not jobs:
            continue
        newest = max(job["result"]["version"] for job, _ in jobs)
        published = [(j, u) for j, u in jobs if j["result"]["version"] == document["version"]]
        name, version = document["document_id"], document["version"]
        if version != newest or not published:
            found.unexpected.append(f"document {name} is at v{version}, the newest job: v{newest}")
            continue
        if document["content_sha256"] not in {upload.sha256 for _, upload in published}:
            found.unexpected.append(f"document {name} holds other bytes than its v{version}'s")
        stored = {job["result"]["chunks"] for job, _ in published}
        if stored != {document["chunks"]}:
            found.duplicated.append(f"document {name}: {document['chunks']} chunks, job {stored}")
    info = client.get(f"/v1/indexes/{index}").raise_for_status().json()
    found.documents, found.chunks = info["documents"], info["chunks"]
    listed_chunks = sum(document["chunks"] for document in listed)
    if (found.documents, found.chunks) != (len(completed), listed_chunks):
        found.duplicated.append(
            f"index totals {found.documents} documents, {found.chunks} chunks; "
            f"expected {len(completed)}, {listed_chunks}"
        )


def _check_searches(found: Findings, run: LoadRun, document_ids: set[str]) -> None:
    for search in run.searches:
        if search.status != 200:
            found.search_errors.append(f"{search.status} {search.detail}")
            continue
        chunks = Counter((r["document_id"], r["chunk_index"]) for r in search.results)
        twice = [chunk for chunk, n in chunks.items() if n > 1]
        strangers = {r["document_id"] for r in search.results} - document_ids
        if twice or strangers:
            found.search_errors.append(f"chunks twice {twice}, unknown documents {strangers}")
        filenames: defaultdict[str, set[str]] = defaultdict(set)
        for result in search.results:
            filenames[result["document_id"]].add(result["filename"])
        mixed = {d: sorted(names) for d, names in filenames.items() if len(names) > 1}
        if mixed:
            found.search_errors.append(f"two versions of a document in one answer: {mixed}")


def check_store(
    found: Findings, data_dir: Path, index: str, *, settings: Settings | None = None
) -> None:
    """With the service stopped, count the points of `index` in its embedded store under
    `data_dir` (or in the store `settings` name, a shared one, at any time)."""
    with VectorStore.open(settings or Settings(data_dir=data_dir)) as store:
        documents = store.list_documents(index)
        for document in documents:
            points = store.count_points(index, document.document_id)
            live = store.count_points(
                index, document.document_id, version=document.version, state="live"
            )
            if points != document.chunks or live != document.chunks:
                kind = found.duplicated if points > document.chunks else found.unexpected
                kind.append(
                    f"document {document.document_id} v{document.version} has {points} points, "
                    f"{live} live of its version, for {document.chunks} chunks"
                )
        total, chunks = store.count_points(index), sum(d.chunks for d in documents)
        if total != chunks:
            kind = found.duplicated if total > chunks else found.unexpected
            kind.append(f"index {index} holds {total} points for {chunks} chunks")


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile (nan of nothing)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)] if ordered else math.nan
