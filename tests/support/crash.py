"""A deployment for the crash-safety tests: `docingest api` and `docingest worker` processes
sharing one data directory (the embedded store, owned by whichever worker runs) and one Redis
key prefix, embedding through the fake OpenAI-compatible server of this test process (so a job
stays in the embedding stage as long as its `latency` says), with ways to find the processes,
kill them, and check afterwards what Redis and the store hold.
"""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis import Redis

from docingest.pipeline.errors import DependencyUnavailable
from docingest.pipeline.keys import TERMINAL_STATUSES, Keys
from docingest.pipeline.services import Services
from docingest.pipeline.settings import Settings
from docingest.pipeline.store import ChunkRecord, VectorStore
from docingest.pipeline.store.engine import Engine
from docingest.redis_server import ensure_redis
from tests.support.docingest_service import Process, ServiceEnv, free_port, start, wait_until_up
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.http_client import ApiClient, Json
from tests.support.settings import FAKE_DIMENSIONS, FAKE_MODEL
from tests.support.waiting import wait_until

WORKER_NUMBERS = itertools.count(1)
"""Numbers every worker of the session, so each has a log file of its own."""


def deployment_env(fake: FakeEmbeddingServer) -> dict[str, str]:
    """Settings of the test deployments: embeddings from `fake`, two texts a request, chunks of
    ~300 characters, extraction in the worker itself (trusted documents; a parsing child would
    add a Python start-up to every run, and isolation has tests of its own)."""
    return {
        "DOCINGEST_ISOLATE_EXTRACTION": "false",
        "DOCINGEST_EMBEDDING_PROVIDER": "openai",
        "DOCINGEST_EMBEDDING_MODEL": FAKE_MODEL,
        "DOCINGEST_EMBEDDING_DIMENSIONS": str(FAKE_DIMENSIONS),
        "DOCINGEST_OPENAI_BASE_URL": fake.base_url,
        "DOCINGEST_OPENAI_API_KEY": "sk-test",
        "DOCINGEST_EMBEDDING_MAX_BATCH": "2",
        "DOCINGEST_EMBEDDING_CONCURRENCY": "2",
        "DOCINGEST_CHUNK_SIZE": "300",
        "DOCINGEST_CHUNK_OVERLAP": "0",
    }


def notes(number: int, paragraphs: int = 6) -> bytes:
    """A small text document of distinct paragraphs (about one chunk each)."""
    return "\n\n".join(
        f"Note {number}.{n}: " + " ".join(f"n{number}p{n}w{word}" for word in range(30)) + "."
        for n in range(paragraphs)
    ).encode()


def journal(theme: str, entries: int) -> bytes:
    """A text document whose every chunk (about one an entry) names `theme`."""
    words = "tide lamp rope gull fog bell chart oar mast sail keel reef".split()
    return "\n\n".join(
        f"Entry {n} of the {theme} journal. "
        + " ".join(f"The {theme} {words[(n + k) % len(words)]} {k}." for k in range(12))
        for n in range(entries)
    ).encode()


@dataclass
class Deployment:
    """One API process and the workers a test starts and kills beside it."""

    env: ServiceEnv
    api: ApiClient
    api_process: Process
    workers: list[Process] = field(default_factory=list)
    baseline: dict[str, int] = field(default_factory=dict)
    """Finished-job counters when the test began (the API may serve several tests)."""

    @property
    def keys(self) -> Keys:
        return Keys(self.env.key_prefix)

    def for_test(self) -> Deployment:
        """The same API, with no workers yet and job counts from now on."""
        assert self.api_process.popen.poll() is None, self.api_process.log()[-3000:]
        return Deployment(
            env=self.env, api=self.api, api_process=self.api_process, baseline=self._counts()
        )

    def redis(self) -> Redis:
        """A decoding client of the deployment's Redis (close it after use)."""
        return Redis.from_url(self.env.environ()["DOCINGEST_REDIS_URL"], decode_responses=True)

    def start_worker(self, *args: str, **extra_env: str) -> Process:
        """Start `docingest worker <args>`; `extra_env` adds settings for this worker only."""
        process = start(
            ["worker", *args], self.env, name=f"worker-{next(WORKER_NUMBERS)}", extra_env=extra_env
        )
        self.workers.append(process)
        return process

    def stop_workers(self) -> None:
        """SIGTERM every worker still running (warm shutdown), so the store can be opened."""
        for process in self.workers:
            if process.popen.poll() is None:
                code = process.stop(signal.SIGTERM)
                assert code == 0, process.log()[-3000:]

    def kill_workers(self) -> None:
        for process in self.workers:
            process.stop(signal.SIGKILL)

    def close(self) -> None:
        """Kill the workers, stop the API."""
        self.kill_workers()
        self.api_process.stop()
        self.api.close()

    def finished_counts(self) -> dict[str, int]:
        """Jobs finished per terminal status since the test began, as the job scripts counted
        them (once per job)."""
        counts = self._counts()
        return {
            status: counts[status] - self.baseline.get(status, 0) for status in TERMINAL_STATUSES
        }

    def _counts(self) -> dict[str, int]:
        client = self.redis()
        try:
            counts = client.hgetall(self.keys.finished)
        finally:
            client.close()
        return {status.value: int(counts.get(status, 0)) for status in TERMINAL_STATUSES}

    def open_store(self) -> VectorStore:
        """Open the local-mode store the workers wrote (only once none of them runs)."""
        return VectorStore.open(Settings(data_dir=self.env.data_dir))

    def logs(self) -> str:
        return "\n".join(f"--- {p.log_path.name}\n{p.log()[-4000:]}" for p in self.workers)


def start_deployment(env: ServiceEnv) -> Deployment:
    """Start `docingest api` for `env` and wait until it answers."""
    api_process = start(["api"], env, name="api")
    try:
        wait_until_up(api_process, env.base_url)
    except BaseException:
        api_process.stop(signal.SIGKILL)
        raise
    deployment = Deployment(env=env, api=ApiClient(env.base_url), api_process=api_process)
    return deployment.for_test()


def wait_for_job_state(
    deployment: Deployment, job_id: str, done: Callable[[Json], bool], *, timeout: float = 60.0
) -> Json:
    """Poll the job through the API until `done(job)`; fail if it finishes first."""

    def reached() -> Json | None:
        job = deployment.api.job(job_id)
        if done(job):
            return job
        assert job["status"] not in TERMINAL_STATUSES, (job, deployment.logs())
        return None

    return wait_until(reached, timeout=timeout, what=f"job {job_id} reaching the state")


def children(pid: int) -> list[int]:
    """The ids of `pid`'s child processes (Linux /proc)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as dead)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def kill(pid: int) -> None:
    """`kill -9 pid`."""
    os.kill(pid, signal.SIGKILL)


def assert_stored_once(store: VectorStore, index: str, job: Json) -> None:
    """The job's document is stored exactly once: one live version (the job's), as many points
    as the job reported chunks, and none staged or left over from another attempt or version."""
    result = job["result"]
    document_id = result["document_id"]
    documents = [d for d in store.list_documents(index) if d.document_id == document_id]
    assert [(d.version, d.chunks) for d in documents] == [(result["version"], result["chunks"])]
    assert store.count_points(index, document_id) == result["chunks"]
    assert store.count_points(index, document_id, state="live") == result["chunks"]
    assert store.count_points(index, document_id, version=result["version"]) == result["chunks"]


class PrivateRedis:
    """A redis-server of the test's own on a free port, append-only under `data_dir`, that can
    be stopped (SIGTERM: it writes its AOF and exits) and started again on the same port."""

    def __init__(self, data_dir: Path) -> None:
        self.url = f"redis://127.0.0.1:{free_port()}/0"
        self._data_dir = data_dir
        self._stack: ExitStack | None = None

    def start(self) -> None:
        stack = ExitStack()
        handle = stack.enter_context(ensure_redis(self.url, data_dir=self._data_dir))
        self._stack = stack
        assert handle.started, "another Redis answered on the free port"

    def stop(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None


class FailingWrites(VectorStore):
    """The real store, whose next `failures` writes fail with `DependencyUnavailable`, as a
    Qdrant that goes away mid-write would: a `write_chunks` call after writing half its
    records, a `write_live` call (one update, all or nothing) after writing none."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.failures = 0

    def write_chunks(self, index: str, records: Sequence[ChunkRecord]) -> None:
        if self.failures <= 0:
            super().write_chunks(index, records)
            return
        self.failures -= 1
        super().write_chunks(index, records[: len(records) // 2])
        raise DependencyUnavailable("Qdrant is unreachable (injected); check that it runs.")

    def write_live(
        self, index: str, records: Sequence[ChunkRecord], *, content: Mapping[str, Any]
    ) -> None:
        if self.failures <= 0:
            super().write_live(index, records, content=content)
            return
        self.failures -= 1
        raise DependencyUnavailable("Qdrant is unreachable (injected); check that it runs.")


class ServicesWithStore(Services):
    """A process's services with the vector store given instead of opened from settings."""

    def __init__(self, settings: Settings, store: VectorStore) -> None:
        super().__init__(settings, owns_store=True)
        self._given_store = store

    @property
    def store(self) -> VectorStore:
        return self._given_store
