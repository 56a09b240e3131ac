"""A bounded load on a real `docingest serve`: small uploads from concurrent clients while search
clients query the same index the whole time, then every job followed until it ends.

Shared by tests/reliability/test_load.py (a short run in CI) and bench/bench_load.py (the full
run); the checks of what the load left behind are in `load_checks`. The service runs with the
production settings (extraction isolated in a child process, production heartbeats and sweep);
only the embedding provider is the fake OpenAI-compatible server, so the load falls on the
service rather than on a model.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from docingest.pipeline.keys import TERMINAL_STATUSES
from docingest.pipeline.settings import Settings
from tests.support.docingest_service import ServiceEnv, running_serve
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.paths import EXAMPLES_DIR

Json = dict[str, Any]

CORPUS_FILES = (  # small real documents of every format that ingest cleanly
    "docx/complex-numbered-lists.docx",
    "docx/header-footer-unicode.docx",
    "docx/worldview-essay-assignment.docx",
    "html/paulgraham-how-to-get-new-ideas.html",
    "html/shift_jis-no-charset-declared.html",
    "html/xinhuanet-hebei-gb2312.html",
    "markdown/ocrmypdf-README_ZH.md",
    "markdown/umlauts-non-utf8.md",
    "pdf/jo-miyazawa-japanese-vertical.pdf",
    "txt/cp1251-russian.txt",
    "txt/cp1252-dutch-anna-karenina.txt",
    "txt/latin1-finnish-sibelius.txt",
    "txt/latin1-french-visa.txt",
    "txt/utf16le-bom-subtitles.txt",
)
EXAMPLE_FILES = ("docling-README.md", "tika-sample-word-document.docx")
QUERIES = (
    "how to get new ideas",
    "numbered list items",
    "Anna Karenina",
    "Sibelius symphony",
    "visa application",
    "document conversion",
    "header and footer",
    "OCR a scanned PDF",
    "essay assignment worldview",
    "subtitles",
)
PRODUCTION = (  # docingest_service.py shortens these for fast tests; a load test keeps the defaults
    "heartbeat_interval_seconds",
    "heartbeat_timeout_seconds",
    "housekeeping_interval_seconds",
)
EMBEDDING_MODEL = "text-embedding-3-small"


def source_files(corpus: Path) -> list[Path]:
    """The documents the uploads are made of."""
    return [corpus / name for name in CORPUS_FILES] + [EXAMPLES_DIR / n for n in EXAMPLE_FILES]


@dataclass(frozen=True)
class Upload:
    """One planned upload."""

    number: int
    document_id: str
    filename: str
    data: bytes = field(repr=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def plan_uploads(
    files: Sequence[Path], *, uploads: int, reupload_share: float = 0.1, seed: int = 0
) -> list[Upload]:
    """`uploads` uploads: distinct document ids over `files` in turn, plus `reupload_share` of
    them re-uploads of an earlier id with other content, each placed after its original."""
    contents = [(path.name, path.read_bytes()) for path in files]
    rng = random.Random(seed)
    reuploads = round(uploads * reupload_share)
    plan = [
        Upload(n, f"doc-{n:04d}-{contents[n % len(contents)][0]}", *contents[n % len(contents)])
        for n in range(uploads - reuploads)
    ]
    originals = list(plan)
    for number in range(len(plan), uploads):
        original = rng.choice(originals)
        others = [content for content in contents if content[1] != original.data]
        name, data = rng.choice(others)
        position = rng.randint(plan.index(original) + 1, len(plan))
        plan.insert(position, Upload(number, original.document_id, name, data))
    return plan


@dataclass(frozen=True)
class Sent:
    """The answer to one upload."""

    upload: Upload
    started: float  # time.monotonic()
    seconds: float  # until the response
    status: int  # HTTP status, 0 if the request itself failed
    job_id: str | None
    detail: str = ""


@dataclass(frozen=True)
class Searched:
    """One search during the load."""

    started: float
    seconds: float
    status: int
    results: list[Json] = field(repr=False)
    detail: str = ""
    took_ms: float | None = None  # the service's own time for it (the response's `took_ms`)


@dataclass
class LoadRun:
    """What the clients saw: uploads sent, searches made, and the jobs' last states."""

    index: str
    sent: list[Sent]
    searches: list[Searched]
    jobs: dict[str, Json | None]  # job id → last state; None when the job is unknown (404)
    started: float
    uploads_done: float
    settled: float

    @property
    def wall_seconds(self) -> float:
        """From the first upload until every job had ended (or the timeout)."""
        return self.settled - self.started


def production_env(data_dir: Path, fake: FakeEmbeddingServer) -> ServiceEnv:
    """A `docingest serve` deployment with production settings, embedding through `fake`."""
    defaults = Settings.model_fields
    extra = {f"DOCINGEST_{name.upper()}": str(defaults[name].default) for name in PRODUCTION}
    extra |= {
        "DOCINGEST_EMBEDDING_PROVIDER": "openai",
        "DOCINGEST_EMBEDDING_MODEL": EMBEDDING_MODEL,
        "DOCINGEST_OPENAI_BASE_URL": fake.base_url,
        "DOCINGEST_OPENAI_API_KEY": "sk-load-test",
        "DOCINGEST_LOCAL_MODEL_THREADS": str(defaults["local_model_threads"].default),
    }
    return ServiceEnv(data_dir=data_dir, key_prefix=f"load-{uuid.uuid4().hex[:10]}:", extra=extra)


@contextmanager
def serving(
    data_dir: Path,
    *,
    code: Path | None = None,
    latency: float = 0.0,
    settings: Mapping[str, str] | None = None,
    words: bool = False,
) -> Iterator[ServiceEnv]:
    """The fake embedding server (answering after `latency` s) and `docingest serve`; Redis
    keys removed afterwards.

    `code`: run the service from that checkout instead (a benchmark's baseline): it goes
    first on PYTHONPATH and is the working directory, which `python -m` children import from.
    `settings`: more `DOCINGEST_` variables for the service. `words`: the fake server's
    vectors cluster as real ones do (`word_vectors`).
    """
    with FakeEmbeddingServer(latency=latency, words=words) as fake:
        env = production_env(data_dir, fake)
        env.extra |= settings or {}
        if code is None:
            with running_serve(env):
                yield env
            return
        env.extra["PYTHONPATH"] = str(code)
        with contextlib.chdir(code), running_serve(env):
            yield env


def _upload(client: httpx.Client, index: str, upload: Upload) -> Sent:
    started = time.monotonic()
    try:
        response = client.post(
            f"/v1/indexes/{index}/documents",
            files={"file": (upload.filename, upload.data)},
            data={"document_id": upload.document_id},
        )
    except httpx.HTTPError as exc:
        return Sent(upload, started, time.monotonic() - started, 0, None, repr(exc))
    seconds = time.monotonic() - started
    if response.status_code != 202:
        return Sent(upload, started, seconds, response.status_code, None, response.text[:300])
    return Sent(upload, started, seconds, 202, str(response.json()["job_id"]))


def _search_loop(
    base_url: str, index: str, stop: threading.Event, out: list[Searched], pause: float
) -> None:
    """POST hybrid searches, `pause` s apart, until `stop` is set."""
    with httpx.Client(base_url=base_url, timeout=60) as client:
        n = 0
        while not stop.wait(pause if n else 0.0):
            body = {"query": QUERIES[n % len(QUERIES)], "top_k": 10, "mode": "hybrid"}
            n += 1
            started = time.monotonic()
            try:
                response = client.post(f"/v1/indexes/{index}/search", json=body)
            except httpx.HTTPError as exc:
                out.append(Searched(started, time.monotonic() - started, 0, [], repr(exc)))
                continue
            seconds = time.monotonic() - started
            ok = response.status_code == 200
            answer: Json = response.json() if ok else {"results": []}
            detail = "" if ok else response.text[:300]
            took_ms = answer.get("took_ms")
            out.append(
                Searched(started, seconds, response.status_code, answer["results"], detail, took_ms)
            )


def run_load(
    base_url: str,
    plan: Sequence[Upload],
    *,
    index: str,
    clients: int,
    searchers: int,
    timeout: float,
    search_pause: float = 0.0,
    log: Callable[[str], None] = lambda line: None,
) -> LoadRun:
    """Send `plan` from `clients` threads (one connection each) while `searchers` threads
    search `index` (pausing `search_pause` s between searches) until every job has ended or
    `timeout` s have passed."""
    with httpx.Client(base_url=base_url, timeout=60) as client:
        client.put(f"/v1/indexes/{index}").raise_for_status()  # searches find it from the start
        stop = threading.Event()
        searches: list[list[Searched]] = [[] for _ in range(searchers)]
        threads = [
            threading.Thread(
                target=_search_loop,
                args=(base_url, index, stop, out, search_pause),
                daemon=True,
            )
            for out in searches
        ]
        for thread in threads:
            thread.start()
        local = threading.local()
        opened: list[httpx.Client] = []

        def send(upload: Upload) -> Sent:
            if not hasattr(local, "client"):
                local.client = httpx.Client(base_url=base_url, timeout=60)
                opened.append(local.client)
            return _upload(local.client, index, upload)

        started = time.monotonic()
        try:
            with ThreadPoolExecutor(clients, thread_name_prefix="upload") as pool:
                sent = list(pool.map(send, plan))
            uploads_done = time.monotonic()
            log(f"{len(sent)} uploads sent in {uploads_done - started:.1f} s; waiting for the jobs")
            job_ids = [each.job_id for each in sent if each.job_id]
            jobs = settle(client, job_ids, index=index, deadline=started + timeout)
            settled = time.monotonic()
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)
            for each in opened:
                each.close()
    return LoadRun(
        index=index,
        sent=sent,
        searches=[search for out in searches for search in out],
        jobs=jobs,
        started=started,
        uploads_done=uploads_done,
        settled=settled,
    )


def settle(
    client: httpx.Client, job_ids: Sequence[str], *, index: str, deadline: float
) -> dict[str, Json | None]:
    """Wait until `index` has no queued or processing job (or `deadline`, monotonic), then
    read every job of `job_ids` once more; a job the API does not know is None."""
    while time.monotonic() < deadline and _active(client, index):
        time.sleep(1.0)
    jobs: dict[str, Json | None] = {}
    pending = list(dict.fromkeys(job_ids))
    while True:
        for job_id in pending:
            response = _get(client, f"/v1/jobs/{job_id}")
            jobs[job_id] = (
                None if response.status_code == 404 else response.raise_for_status().json()
            )
        pending = [job_id for job_id in pending if _unfinished(jobs[job_id])]
        if not pending or time.monotonic() >= deadline:
            return jobs
        time.sleep(1.0)


def _active(client: httpx.Client, index: str) -> bool:
    for status in ("queued", "processing"):
        params: dict[str, str | int] = {"index": index, "status": status, "limit": 1}
        if _get(client, "/v1/jobs", params=params).raise_for_status().json()["jobs"]:
            return True
    return False


def _get(client: httpx.Client, path: str, **kwargs: Any) -> httpx.Response:
    """GET, sent again once if the connection broke: a kept-alive connection that the server
    closed as idle while the process was paused breaks under the next request (a GET is safe
    to repeat)."""
    try:
        return client.get(path, **kwargs)
    except httpx.TransportError:
        return client.get(path, **kwargs)


def _unfinished(job: Json | None) -> bool:
    return job is not None and job["status"] not in TERMINAL_STATUSES
