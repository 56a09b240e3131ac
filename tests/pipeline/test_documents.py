"""Metadata PATCH and delete by filter on the real store (both engines) and the test Redis:
all chunks at once and never a mix for a search, the store lock and the uploads in flight,
and each deleted document handled as a single delete (`docingest.pipeline.documents`)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from docingest.pipeline.documents import delete_matching, patch_metadata
from docingest.pipeline.errors import (
    DocumentBusy,
    DocumentIngesting,
    DocumentNotFound,
    InvalidFilter,
    InvalidMetadata,
)
from docingest.pipeline.search import SearchRequest
from docingest.pipeline.services import Services
from docingest.pipeline.store import ADMIN, Reader, SearchFilter
from tests.pipeline.store.test_store import records
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.engines import ENGINES, engine_fields
from tests.support.jobs import job_spec
from tests.support.redis_db import TestRedis
from tests.support.services import services_factory

INDEX = "docs"


@pytest.fixture(params=ENGINES)
def services(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    embedding_server: FakeEmbeddingServer,
    redis_db: TestRedis,
) -> Iterator[Services]:
    """One process's services on either engine, with the index `docs` made."""
    with services_factory(tmp_path, redis_db.prefix, embedding_server) as make:
        made = make(**engine_fields(request.param, tmp_path))
        made.ensure_index(INDEX)
        yield made


def ingest(
    services: Services, document_id: str, chunks: int, *, index: str = INDEX, **metadata: Any
) -> int:
    """Store a published version of a document as an ingest does (a version from the fence,
    written, published, retired); return the version."""
    config = services.store.index_config(index)
    assert config is not None and config.embedding.dimensions
    version = services.next_version(index, document_id)
    texts = [f"harbour report {document_id} part {n}" for n in range(chunks)]
    rng = np.random.default_rng(version)
    written = [
        dataclasses.replace(
            record,
            dense=(v := rng.normal(size=config.embedding.dimensions).astype(np.float32))
            / np.linalg.norm(v),
        )
        for record in records(document_id, version, texts, metadata=metadata)
    ]
    services.store.write_chunks(index, written)
    services.store.publish(index, document_id, version)
    services.store.retire(index, document_id, keep_version=version)
    return version


def chunk_metadata(services: Services, document_id: str) -> list[dict[str, Any]]:
    """The metadata on every stored point of the document (any version, any state)."""
    from docingest.pipeline.store.requests import fields_filter

    found = []
    selector = fields_filter(document_id=document_id)
    for record in services.store._scroll(INDEX, selector, payload=["metadata", "version", "state"]):
        found.append({**(record.payload or {})})
    return found


def test_patch_replaces_the_metadata_of_every_chunk_without_embedding(
    services: Services, embedding_server: FakeEmbeddingServer
) -> None:
    version = ingest(services, "report", 40, team="a", year=2023)
    before = services.store.stored_vectors(INDEX, "report", version)
    requests_before = len(embedding_server.served)
    document = patch_metadata(services, INDEX, "report", {"team": "b", "tags": ["x", "y"]})
    assert (document.version, document.metadata, document.chunks) == (
        version + 1,
        {"team": "b", "tags": ["x", "y"]},
        40,
    )
    assert services.store.get_document(INDEX, "report") == document
    stored = chunk_metadata(services, "report")
    assert len(stored) == 40  # the old version was retired
    assert all(p["metadata"] == {"team": "b", "tags": ["x", "y"]} for p in stored)
    assert all((p["version"], p["state"]) == (version + 1, "live") for p in stored)
    after = services.store.stored_vectors(INDEX, "report", version + 1)
    assert before.keys() == after.keys()
    # the same vectors (a cosine collection normalises again on write: float rounding only)
    assert all(np.allclose(before[key], after[key], atol=1e-6) for key in before)
    assert len(embedding_server.served) == requests_before  # nothing embedded again
    found = services.store.list_documents(INDEX, filter=SearchFilter.parse({"tags": "y"}))
    assert [d.document_id for d in found] == ["report"]
    assert services.store.list_documents(INDEX, filter=SearchFilter.parse({"team": "a"})) == []


@pytest.mark.parametrize(
    "bad",
    [None, "team=b", ["a"], {"text": "reserved"}, {"1bad": 1}, {"nested": {"a": 1}},
     {"big": "x" * 100_000}, {"n": 2**70}],
)  # fmt: skip
def test_patch_validates_like_an_upload(services: Services, bad: object) -> None:
    ingest(services, "report", 3, team="a")
    with pytest.raises(InvalidMetadata):
        patch_metadata(services, INDEX, "report", bad)
    assert services.store.get_document(INDEX, "report").metadata == {"team": "a"}


def test_patch_of_an_unknown_document_is_not_found(services: Services) -> None:
    with pytest.raises(DocumentNotFound):
        patch_metadata(services, INDEX, "absent", {"team": "b"})


def _pause_at(
    services: Services, method: str, reached: threading.Event, go_on: threading.Event
) -> None:
    """Make the store stop before `method` (publish or retire) until `go_on` is set."""
    original: Callable[..., Any] = getattr(services.store, method)

    def paused(*args: Any, **kwargs: Any) -> Any:
        reached.set()
        assert go_on.wait(120), f"the test never let {method} go on"
        return original(*args, **kwargs)

    setattr(services.store, method, paused)


def test_a_search_during_a_patch_sees_old_or_new_metadata_never_a_mix(
    services: Services,
) -> None:
    """Searches run while the new version is staged, while both versions are live (between
    publish and retire), and after: each sees one version's metadata on all its chunks."""
    ingest(services, "report", 120, team="old")
    events = {name: (threading.Event(), threading.Event()) for name in ("publish", "retire")}
    for name, (reached, go_on) in events.items():
        _pause_at(services, name, reached, go_on)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["document"] = patch_metadata(services, INDEX, "report", {"team": "new"})
        except BaseException as exc:  # reported below
            outcome["error"] = exc

    patcher = threading.Thread(target=run)
    patcher.start()
    seen: list[str] = []

    def search_once() -> None:
        for mode in ("keyword", "vector", "hybrid"):
            request = SearchRequest(query="harbour report", top_k=100, mode=mode)
            results = services.search(INDEX, request, reader=ADMIN).results
            teams = {result.metadata["team"] for result in results}
            assert results and {result.document_id for result in results} == {"report"}
            assert len(teams) == 1, f"a {mode} search saw a mix: {teams}"
            seen.append(teams.pop())
            filtered = SearchRequest(query="harbour", top_k=100, mode=mode, filter={"team": "old"})
            found = services.search(INDEX, filtered, reader=ADMIN).results
            assert {r.metadata["team"] for r in found} <= {"old"}

    for name in ("publish", "retire"):
        reached, go_on = events[name]
        assert reached.wait(120), f"the patch never reached {name}: {outcome}"
        search_once()
        go_on.set()
    patcher.join(120)
    assert "error" not in outcome, outcome
    search_once()
    assert seen[:3] == ["old"] * 3  # staged: not visible yet
    assert seen[-3:] == ["new"] * 3
    assert set(seen) == {"old", "new"}


def test_patch_during_a_reingest_answers_409_and_a_failed_one_does_not_block(
    services: Services,
) -> None:
    ingest(services, "report", 3, team="a")
    job = services.jobs.create(job_spec(INDEX, document_id="report"))
    claim = services.jobs.claim(job.job_id, max_attempts=3, stale_after=60)
    assert claim.outcome == "claimed"
    with pytest.raises(DocumentIngesting):  # running, no version yet
        patch_metadata(services, INDEX, "report", {"team": "b"})
    version = services.next_version(INDEX, "report")
    assert services.jobs.set_version(job.job_id, claim.attempt, version)
    with pytest.raises(DocumentIngesting):  # running with a newer version
        patch_metadata(services, INDEX, "report", {"team": "b"})
    assert services.jobs.fail(job.job_id, claim.attempt, {"code": "x", "message": "failed"})
    document = patch_metadata(services, INDEX, "report", {"team": "b"})
    assert document.version == version + 1 and document.metadata == {"team": "b"}
    # an upload handed a version after the PATCH looked is not superseded by it
    assert services.fence.next_version_if(INDEX, "report", seen=version, floor=0) is None


def test_patch_waits_for_the_store_lock_and_says_busy_past_its_wait(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    import docingest.pipeline.documents

    ingest(services, "report", 3, team="a")
    monkeypatch.setattr(docingest.pipeline.documents, "PATCH_LOCK_WAIT_SECONDS", 0.2)
    with services.fence.lock(INDEX, "report"), pytest.raises(DocumentBusy):
        patch_metadata(services, INDEX, "report", {"team": "b"})
    assert services.store.get_document(INDEX, "report").metadata == {"team": "a"}


def test_concurrent_patches_leave_one_of_them_on_every_chunk(services: Services) -> None:
    ingest(services, "report", 30, team="a")
    results: list[Any] = []

    def run(team: str) -> None:
        results.append(patch_metadata(services, INDEX, "report", {"team": team}))

    threads = [threading.Thread(target=run, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(results) == 4
    assert sorted(d.version for d in results) == [2, 3, 4, 5]  # one after the other
    last = max(results, key=lambda d: d.version)
    stored = chunk_metadata(services, "report")
    assert len(stored) == 30 and all(p["metadata"] == last.metadata for p in stored)


def test_delete_by_filter_deletes_each_match_as_a_single_delete(services: Services) -> None:
    for n in range(7):
        ingest(services, f"doc-{n}", 2, team="a" if n % 2 else "b")
    deleted: list[str] = []
    original = services.delete_document

    def counting(index: str, document_id: str, *, reader: Reader = ADMIN) -> None:
        deleted.append(document_id)
        original(index, document_id, reader=reader)

    services.delete_document = counting  # type: ignore[method-assign]
    outcome = delete_matching(services, INDEX, SearchFilter.parse({"team": "a"}), limit=2)
    assert (outcome.deleted, outcome.more) == (2, True)
    outcome = delete_matching(services, INDEX, SearchFilter.parse({"team": "a"}), limit=2)
    assert (outcome.deleted, outcome.more) == (1, False)
    assert deleted == ["doc-1", "doc-3", "doc-5"]
    # each went through the single delete: its version counter moved past the deleted one
    assert all(services.fence.current_version(INDEX, d) == 2 for d in deleted)
    left = [d.document_id for d in services.store.list_documents(INDEX)]
    assert left == ["doc-0", "doc-2", "doc-4", "doc-6"]
    assert services.store.count_points(INDEX) == 8
    everything = delete_matching(services, INDEX, None, limit=1000)
    assert (everything.deleted, everything.more) == (4, False)
    assert services.store.count_points(INDEX) == 0


MATCH_ALL = [
    {"document_id": {"exists": True}},
    {"$not": {"nobody-has": "this"}},
    {"team": {"ne": "z"}},
    {"team": {"in": ["a", "b"]}},
    {"$or": [{"team": "a"}, {"team": {"exists": False}}, {"team": "b"}]},
]
"""Filters that match every document below, however they are written."""


@pytest.mark.parametrize("raw", MATCH_ALL)
def test_a_filter_matching_every_document_deletes_nothing(
    services: Services, raw: dict[str, Any]
) -> None:
    for n in range(4):
        ingest(services, f"doc-{n}", 2, team="ab"[n % 2])
    with pytest.raises(InvalidFilter, match="all=true"):
        delete_matching(services, INDEX, SearchFilter.parse(raw), limit=1000)
    assert len(services.store.list_documents(INDEX)) == 4
    assert services.store.count_points(INDEX) == 8


def test_a_filter_leaving_one_document_out_deletes_the_rest(services: Services) -> None:
    for n in range(4):
        ingest(services, f"doc-{n}", 1, team="ab"[n % 2])
    ingest(services, "odd-one", 1)  # no team: `ne` matches it, `exists` does not
    outcome = delete_matching(
        services, INDEX, SearchFilter.parse({"team": {"exists": True}}), limit=10
    )
    assert (outcome.deleted, outcome.more) == (4, False)
    assert [d.document_id for d in services.store.list_documents(INDEX)] == ["odd-one"]
    # the one left is every document now: the same kind of filter is refused
    with pytest.raises(InvalidFilter):
        delete_matching(services, INDEX, SearchFilter.parse({"team": {"ne": "a"}}), limit=10)
    nothing = delete_matching(services, INDEX, SearchFilter.parse({"team": "a"}), limit=10)
    assert (nothing.deleted, nothing.more) == (0, False)
