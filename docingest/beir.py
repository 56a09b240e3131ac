"""Read a retrieval test set in the BEIR layout, and load its corpus through a running service.

The layout (Thakur et al., 2021, used by SciFact, Cranfield and most public sets) is a folder
holding `corpus.jsonl` (`{"_id", "title", "text"}` per line), `queries.jsonl` (`{"_id",
"text"}`) and `qrels/<split>.tsv` (`query-id`, `corpus-id`, `score`, tab-separated, with a
header line). Read by hand: the `beir` package pulls in PyTorch and downloads data sets.
"""

from __future__ import annotations

import csv
import json
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docingest import Client, DocingestError, NotFound

RETRY_STATUSES = (503, 507)
"""Refusals that pass (the store busy, the staging area full): the upload is sent again."""
RETRY_SECONDS = 2.0

Qrels = dict[str, dict[str, int]]
"""Graded judgments: query id → {document id: relevance > 0}."""


@dataclass(frozen=True)
class TestSet:
    """Queries and their judgments; only queries with at least one relevant document."""

    queries: dict[str, str]
    qrels: Qrels


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from exc
            if not isinstance(record, dict) or "_id" not in record:
                raise ValueError(f'{path}:{number}: expected an object with "_id"')
            yield record


def read_qrels(path: Path) -> Qrels:
    """Read a BEIR qrels TSV; judgments of 0 (judged not relevant) are left out."""
    qrels: Qrels = {}
    with path.open(encoding="utf-8", newline="") as handle:
        rows = csv.reader(handle, delimiter="\t")
        for number, row in enumerate(rows, 1):
            if not row or (number == 1 and row[0] == "query-id"):
                continue
            if len(row) < 3:
                raise ValueError(f"{path}:{number}: expected query-id, corpus-id, score")
            try:
                score = int(row[2])
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: score {row[2]!r} is not an integer") from exc
            if score > 0:
                qrels.setdefault(row[0], {})[row[1]] = score
    return qrels


def load_test_set(folder: Path, *, split: str = "test", qrels: Path | None = None) -> TestSet:
    """Read `queries.jsonl` and `qrels/<split>.tsv` (or `qrels`) from a BEIR folder."""
    judgments = read_qrels(qrels or folder / "qrels" / f"{split}.tsv")
    queries = {
        str(record["_id"]): str(record.get("text", ""))
        for record in _jsonl(folder / "queries.jsonl")
    }
    missing = sorted(set(judgments) - set(queries))
    if missing:
        raise ValueError(f"{len(missing)} judged queries are not in queries.jsonl: {missing[:5]}")
    return TestSet({qid: queries[qid] for qid in judgments}, judgments)


def read_corpus(path: Path) -> Iterator[dict[str, Any]]:
    """Each record of a `corpus.jsonl` in file order (`{"_id", "title", "text"}`); `ValueError`
    names the line of one that is not a JSON object with an `_id`."""
    return _jsonl(path)


def corpus_text(record: dict[str, Any]) -> str:
    """A corpus record as the .txt a user would upload: its title, a blank line, its text."""
    title = str(record.get("title") or "").strip()
    text = str(record.get("text") or "").strip()
    return f"{title}\n\n{text}\n" if title else f"{text}\n"


@dataclass
class IngestReport:
    uploaded: int = 0
    skipped: int = 0
    """Already in the index (a resumed run) before this run began."""
    failed: dict[str, str] = field(default_factory=dict)
    """Document id → the error, for uploads refused or jobs that failed."""
    seconds: float = 0.0


def existing_documents(client: Client, index: str) -> set[str]:
    """The ids of the documents stored in `index` (none when it does not exist yet)."""
    try:
        return {document.document_id for document in client.iter_documents(index, page_size=1000)}
    except NotFound:
        return set()


def ingest_corpus(
    client: Client,
    index: str,
    corpus: Path,
    *,
    concurrency: int = 8,
    max_pending: int = 64,
    on_progress: Callable[[IngestReport, int], None] = lambda report, total: None,
    poll_seconds: float = 1.0,
) -> IngestReport:
    """Upload each corpus record as `<_id>.txt` with document id `_id` and its title as the
    `title` metadata (what an index with contextual headers embeds), and wait for the jobs.

    Resumable: documents the index already holds are skipped, so a run that was stopped
    continues where it was. At most `max_pending` jobs are in flight, so a large corpus does
    not fill the service's staging area at once.
    """
    started = time.monotonic()
    done = existing_documents(client, index)
    records = [r for r in _jsonl(corpus) if str(r["_id"]) not in done]
    report = IngestReport(skipped=len(done))
    total = len(records) + len(done)
    pending: dict[str, str] = {}  # job id → document id
    with (
        tempfile.TemporaryDirectory(prefix="docingest-eval-") as scratch,
        ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="upload") as pool,
    ):
        uploads: dict[Future[str], dict[str, Any]] = {}
        queue = iter(records)
        again: deque[dict[str, Any]] = deque()  # refused for now (503, 507): sent again
        exhausted = False
        next_poll = time.monotonic()
        while not (exhausted and not again and not uploads and not pending):
            while (again or not exhausted) and len(uploads) < concurrency:
                if len(uploads) + len(pending) >= max_pending:
                    break
                record = again.popleft() if again else next(queue, None)
                if record is None:
                    exhausted = True
                    break
                future = pool.submit(_upload, client, index, Path(scratch), record)
                uploads[future] = record
            if uploads:
                finished, _ = wait(list(uploads), timeout=0.2, return_when=FIRST_COMPLETED)
            else:
                finished = set()
                time.sleep(min(poll_seconds, 0.2))
            for future in finished:
                record = uploads.pop(future)
                document_id = str(record["_id"])
                try:
                    pending[future.result()] = document_id
                except DocingestError as exc:
                    if exc.status is None:
                        raise  # the service is gone: stop instead of failing every file
                    if exc.status in RETRY_STATUSES:
                        again.append(record)
                        time.sleep(RETRY_SECONDS)
                        continue
                    report.failed[document_id] = f"{exc.code}: {exc.message}"
            if pending and time.monotonic() >= next_poll:
                next_poll = time.monotonic() + poll_seconds
                _poll(client, pending, report)
                on_progress(report, total)
    report.seconds = time.monotonic() - started
    on_progress(report, total)
    return report


def _upload(client: Client, index: str, scratch: Path, record: dict[str, Any]) -> str:
    document_id = str(record["_id"])
    # The file's name is the id; a scratch subfolder per upload keeps names distinct.
    folder = Path(tempfile.mkdtemp(dir=scratch))
    path = folder / f"{_safe_name(document_id)}.txt"
    path.write_text(corpus_text(record), encoding="utf-8")
    try:
        title = str(record.get("title") or "").strip()
        metadata = {"title": title} if title else None
        return client.upload(index, path, document_id=document_id, metadata=metadata).job_id
    finally:
        path.unlink(missing_ok=True)
        folder.rmdir()


def _safe_name(document_id: str) -> str:
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in document_id)[:100]
    return name or "document"


def _poll(client: Client, pending: dict[str, str], report: IngestReport) -> None:
    for job_id in list(pending):
        job = client.get_job(job_id)
        if not job.finished:
            continue
        document_id = pending.pop(job_id)
        if job.status == "completed":
            report.uploaded += 1
        elif job.error is not None:
            report.failed[document_id] = f"{job.error.code}: {job.error.message}"
        else:
            report.failed[document_id] = f"{job.status}: the job did not complete"
