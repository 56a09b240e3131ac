"""The documents endpoints of v1.2 through real uvicorn on both engines: paged and filtered
listing (and the v1 answer without paging), metadata PATCH, delete by filter. Documents are
stored through the app's own `Services`, as an ingest stores them
(tests/pipeline/test_documents.py); the ingest itself is tested elsewhere."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from docingest.pipeline.services import Services
from docingest.workers.app import create_celery_app
from tests.pipeline.test_documents import INDEX, ingest
from tests.support.api_app import api_client, is_contract_error
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.engines import ENGINES, engine_fields
from tests.support.redis_db import TestRedis
from tests.support.settings import service_settings

DOCS = f"/v1/indexes/{INDEX}/documents"


@dataclass
class Api:
    http: httpx.Client
    services: Services


@pytest.fixture(params=ENGINES)
def api(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    redis_db: TestRedis,
    embedding_server: FakeEmbeddingServer,
) -> Iterator[Api]:
    """The app under uvicorn sharing its `Services` with the test (no worker runs)."""
    engine = engine_fields(request.param, tmp_path)
    settings = service_settings(tmp_path, redis_db.prefix, embedding_server, **engine)
    services = Services(settings, owns_store=True)
    services.ensure_index(INDEX)
    try:
        with api_client(settings, services=services, celery=create_celery_app(settings)) as http:
            yield Api(http, services)
    finally:
        services.close()


def listing(http: httpx.Client, **params: Any) -> dict[str, Any]:
    if "filter" in params and not isinstance(params["filter"], str):
        params["filter"] = json.dumps(params["filter"])
    response = http.get(DOCS, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"documents", "next_cursor"}
    return body


def every_page(http: httpx.Client, **params: Any) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        body = listing(http, **params, **({"cursor": cursor} if cursor else {}))
        pages.append([document["document_id"] for document in body["documents"]])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages


def test_listing_pages_in_id_order_filters_and_still_answers_v1(api: Api) -> None:
    ids = [f"team-{'ab'[n % 2]}/report-{n:02d}.pdf" for n in range(23)]
    for n, document_id in enumerate(ids):
        ingest(api.services, document_id, 2, team="ab"[n % 2], year=2020 + n % 4)
    v1 = listing(api.http)  # no paging parameter: every document, as v1 answered
    assert [d["document_id"] for d in v1["documents"]] == sorted(ids)
    assert v1["next_cursor"] is None
    assert set(v1["documents"][0]) >= {"document_id", "filename", "format", "version",
        "content_sha256", "pages", "words", "chunks", "metadata", "ingested_at", "ocr"}  # fmt: skip
    pages = every_page(api.http, limit=5)
    assert [len(page) for page in pages] == [5, 5, 5, 5, 3]
    assert [i for page in pages for i in page] == sorted(ids)
    assert len(listing(api.http, filter={"team": "a"})["documents"]) == 12  # default page 100
    assert [i for page in every_page(api.http, limit=4, filter={"team": "b", "year": 2021})
            for i in page] == sorted(ids[1::4])  # fmt: skip
    wanted = {"document_id": [ids[3], ids[0]]}
    assert every_page(api.http, filter=wanted) == [sorted([ids[0], ids[3]])]
    info = api.http.get(f"/v1/indexes/{INDEX}").json()
    assert (info["documents"], info["chunks"]) == (23, 46)


def test_patch_replaces_metadata_and_search_sees_it(api: Api) -> None:
    ingest(api.services, "report.pdf", 12, team="a")
    response = api.http.patch(f"{DOCS}/report.pdf", json={"metadata": {"team": "b", "n": 3}})
    assert response.status_code == 200, response.text
    patched = response.json()
    assert (patched["metadata"], patched["version"], patched["chunks"]) == (
        {"team": "b", "n": 3},
        2,
        12,
    )
    assert api.http.get(f"{DOCS}/report.pdf").json() == patched
    search = {"query": "harbour report", "top_k": 20, "mode": "keyword"}
    results = api.http.post(f"/v1/indexes/{INDEX}/search", json=search).json()["results"]
    assert len(results) == 12 and all(r["metadata"] == {"team": "b", "n": 3} for r in results)
    old = {**search, "filter": {"team": "a"}}
    assert api.http.post(f"/v1/indexes/{INDEX}/search", json=old).json()["results"] == []
    missing = api.http.patch(f"{DOCS}/absent.pdf", json={"metadata": {"team": "b"}})
    assert is_contract_error(missing, status=404, code="document_not_found")
    bad = api.http.patch(f"{DOCS}/report.pdf", json={"metadata": {"text": "reserved"}})
    assert is_contract_error(bad, status=400, code="invalid_metadata")
    cleared = api.http.patch(f"{DOCS}/report.pdf", json={"metadata": {}})
    assert cleared.status_code == 200 and cleared.json()["metadata"] == {}


def test_delete_by_filter_needs_a_filter_and_deletes_each_match(api: Api) -> None:
    for n in range(6):
        ingest(api.services, f"doc-{n}", 2, team="a" if n < 4 else "b")
    for params in ({}, {"filter": "{}"}, {"filter": '{"team": "a"}', "all": "true"}):
        refused = api.http.delete(DOCS, params=params)
        assert is_contract_error(refused, status=400, code="invalid_filter")
    assert len(listing(api.http)["documents"]) == 6  # nothing deleted by accident
    first = api.http.delete(DOCS, params={"filter": '{"team": "a"}', "limit": 3})
    assert first.status_code == 202 and first.json() == {"deleted": 3, "more": True}
    second = api.http.delete(DOCS, params={"filter": '{"team": "a"}'})
    assert second.status_code == 202 and second.json() == {"deleted": 1, "more": False}
    assert [d["document_id"] for d in listing(api.http)["documents"]] == ["doc-4", "doc-5"]
    every = api.http.delete(DOCS, params={"all": "true"})
    assert every.json() == {"deleted": 2, "more": False}
    assert listing(api.http)["documents"] == []
    assert api.services.store.count_points(INDEX) == 0
