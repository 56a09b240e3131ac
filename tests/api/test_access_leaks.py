"""The leak suite through HTTP on both engines: random documents and access lists, random
callers (a user key with its own principals, a service key naming them in the header, an
admin) and both index rules, each read path's answer compared with the reference rule of
tests/pipeline/test_access_leaks.py, computed there independently of the service's code."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docingest.pipeline.services import Services
from docingest.workers.app import create_celery_app
from tests.pipeline.test_access_leaks import GRANTABLE, documents, may_read, store_document
from tests.support.api_app import api_client
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.engines import ENGINES, engine_fields
from tests.support.redis_db import TestRedis
from tests.support.settings import service_settings

ADMIN_KEY = "leaks-admin-key-0123456789"
SERVICE_KEY = "leaks-service-key-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
_names = itertools.count()

callers = st.one_of(
    st.just(("admin", None)),
    st.tuples(
        st.sampled_from(["user", "service"]),
        st.lists(st.sampled_from(GRANTABLE), max_size=3, unique=True),
    ),
)


@pytest.fixture(params=ENGINES)
def api(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    redis_db: TestRedis,
    embedding_server: FakeEmbeddingServer,
) -> Iterator[tuple[httpx.Client, Services]]:
    api_keys = [{"key": ADMIN_KEY}, {"key": SERVICE_KEY, "role": "service"}]
    settings = service_settings(
        tmp_path,
        redis_db.prefix,
        embedding_server,
        api_keys=api_keys,
        **engine_fields(request.param, tmp_path),
    )
    services = Services(settings, owns_store=True)
    try:
        with api_client(settings, services=services, celery=create_celery_app(settings)) as http:
            yield http, services
    finally:
        services.close()


def headers_of(http: httpx.Client, role: str, held: list[str] | None) -> dict[str, str]:
    if role == "admin":
        return ADMIN
    if role == "service":
        return {
            "Authorization": f"Bearer {SERVICE_KEY}",
            "X-Docingest-Principals": json.dumps(held),
        }
    made = http.post(
        "/v1/keys", json={"name": "u", "role": "user", "principals": held}, headers=ADMIN
    )
    assert made.status_code == 201, made.text
    return {"Authorization": f"Bearer {made.json()['key']}"}


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(docs=documents, mode=st.sampled_from(["open", "restricted"]), caller=callers)
def test_every_read_path_over_http_answers_only_what_the_caller_may_see(
    api: tuple[httpx.Client, Services],
    docs: list[tuple[list[str] | None, int]],
    mode: str,
    caller: tuple[str, list[str] | None],
) -> None:
    http, services = api
    index = f"httpleaks{next(_names)}"
    assert http.put(f"/v1/indexes/{index}", json={"access": mode}, headers=ADMIN).is_success
    try:
        role, held = caller
        chunks_of = {}
        access_of = {}
        for number, (access, chunks) in enumerate(docs):
            document_id = f"doc {number}"
            store_document(services, index, document_id, chunks, access)
            chunks_of[document_id], access_of[document_id] = chunks, access
        headers = headers_of(http, role, held)
        reference = None if role == "admin" else held
        visible = sorted(d for d in chunks_of if may_read(access_of[d], mode, reference))
        visible_chunks = {(d, n) for d in visible for n in range(chunks_of[d])}
        base = f"/v1/indexes/{index}"

        for search_mode in ("vector", "keyword", "hybrid"):
            body = {"query": "harbour quay", "top_k": 50, "mode": search_mode, "rerank": False}
            found = http.post(f"{base}/search", json=body, headers=headers).json()["results"]
            assert {(r["document_id"], r["chunk_index"]) for r in found} == visible_chunks
        got = http.get(f"{base}/search", params={"q": "harbour", "top_k": 3}, headers=headers)
        assert len(got.json()["results"]) == min(3, len(visible_chunks))
        assert {(r["document_id"], r["chunk_index"]) for r in got.json()["results"]} <= (
            visible_chunks
        )

        whole = http.get(f"{base}/documents", headers=headers).json()["documents"]
        assert [d["document_id"] for d in whole] == visible
        paged = http.get(f"{base}/documents", params={"limit": 1000}, headers=headers).json()
        assert [d["document_id"] for d in paged["documents"]] == visible
        info = http.get(base, headers=headers).json()
        assert (info["documents"], info["chunks"]) == (len(visible), len(visible_chunks))

        for document_id in chunks_of:
            one = http.get(f"{base}/documents/{document_id}", headers=headers)
            its_chunks = http.get(f"{base}/documents/{document_id}/chunks", headers=headers)
            if document_id in visible:
                assert one.status_code == 200 and its_chunks.status_code == 200
            else:
                missing = http.get(f"{base}/documents/{document_id}!absent", headers=headers)
                for answer in (one, its_chunks):
                    assert answer.status_code == 404
                    assert answer.json()["error"]["message"] == missing.json()["error"][
                        "message"
                    ].replace("!absent", "")
    finally:
        http.delete(f"/v1/indexes/{index}", headers=ADMIN)
