"""API keys through real uvicorn: 401 without a valid key, 403 outside a key's indexes, and
the key itself never echoed. Key A is given in clear and limited to index "a"; key B is given
as its sha256 and may use every index. Keys KA and KB are limited to "team-ka" and "team-kb",
names long enough to look for in an answer: neither may learn of the other's index."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.support.api_app import api_client, documented_endpoints, is_contract_error, upload
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import private_redis, unique_prefix
from tests.support.settings import FAKE_DIMENSIONS, service_settings

KEY_A = f"key-a-{uuid.uuid4().hex}"
KEY_B = f"key-b-{uuid.uuid4().hex}"
A = {"Authorization": f"Bearer {KEY_A}"}
B = {"Authorization": f"Bearer {KEY_B}"}
KEY_KA = f"key-ka-{uuid.uuid4().hex}"
KEY_KB = f"key-kb-{uuid.uuid4().hex}"
KA = {"Authorization": f"Bearer {KEY_KA}"}
KB = {"Authorization": f"Bearer {KEY_KB}"}
DOC = b"Harbour notes: the tide table changes on Sunday, and the ferry leaves at dawn."


def _no_key_in(response: httpx.Response) -> None:
    """Fail the request that echoes a key, in its body or any header."""
    response.read()
    for key in (KEY_A, KEY_B, KEY_KA, KEY_KB):
        assert key not in response.text, f"{response.request.url} echoed a key in its body"
        for name, value in response.headers.items():
            assert key not in value, f"{response.request.url} echoed a key in header {name}"


@dataclass
class Served:
    client: httpx.Client
    job_a: str
    job_b: str
    job_ka: str
    job_kb: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    prefix = unique_prefix("auth")
    api_keys = [
        {"key": KEY_A, "indexes": ["a"], "name": "team-a"},
        {"sha256": hashlib.sha256(KEY_B.encode()).hexdigest(), "name": "admin"},
        {"key": KEY_KA, "indexes": ["team-ka"], "name": "tenant-ka"},
        {"key": KEY_KB, "indexes": ["team-kb"], "name": "tenant-kb"},
    ]
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as fake, private_redis(prefix):
        settings = service_settings(
            tmp_path_factory.mktemp("auth"), prefix, fake, api_keys=api_keys
        )
        hooks = {"event_hooks": {"response": [_no_key_in]}}
        with api_client(settings, client_options=hooks) as client:
            for index in ("a", "b"):
                assert client.put(f"/v1/indexes/{index}", headers=B).status_code == 201
            job_a = upload(client, "a", DOC, headers=A).raise_for_status().json()["job_id"]
            job_b = upload(client, "b", DOC, headers=B).raise_for_status().json()["job_id"]
            job_ka = upload(client, "team-ka", DOC, headers=KA).raise_for_status().json()
            job_kb = upload(client, "team-kb", DOC, headers=KB).raise_for_status().json()
            yield Served(client, job_a, job_b, job_ka["job_id"], job_kb["job_id"])


def request(
    client: httpx.Client, method: str, path: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    """Send `method path` with a body that fits it (a file, a search, nothing)."""
    if method == "post" and path.endswith("/documents"):
        return upload(client, path.split("/")[3], DOC, headers=headers)
    if method == "post" and path.endswith("/search"):
        return client.post(path, json={"query": "tide"}, headers=headers)
    if method == "get" and path.endswith("/search"):
        return client.get(path, params={"q": "tide"}, headers=headers)
    if method == "put" and "/webhooks/" in path:  # a public address: no DNS needed
        hook = {"url": "http://93.184.215.14/hook", "events": ["job.completed"]}
        return client.put(path, json=hook, headers=headers)
    if method == "put" and "/sources/" in path:  # a public address; nothing runs it here
        source = {"type": "web", "config": {"start_urls": ["http://93.184.215.14/"]}}
        return client.put(path, json=source, headers=headers)
    if method == "post" and path == "/v1/keys":
        return client.post(path, json={"name": "made", "role": "user"}, headers=headers)
    if method == "patch":
        return client.patch(path, json={"metadata": {"team": "x"}}, headers=headers)
    if method == "delete" and path.endswith("/documents"):
        return client.delete(path, params={"filter": '{"team": "x"}'}, headers=headers)
    return client.request(method.upper(), path, headers=headers)


def concrete(path: str, *, index: str, job_id: str) -> str:
    return path.format(
        index=index,
        job_id=job_id,
        document_id="notes.txt",
        name="hook",
        id="key_unknown",
        run_id="run_unknown",
    )


def protected_endpoints() -> list[tuple[str, str]]:
    return sorted(e for e in documented_endpoints() if e[1] != "/healthz")


WRONG = {
    "no header": {},
    "unknown key": {"Authorization": "Bearer not-a-key"},
    "key A as Basic": {"Authorization": f"Basic {KEY_A}"},
    "bearer without a key": {"Authorization": "Bearer"},
}


@pytest.mark.parametrize("credentials", list(WRONG), ids=list(WRONG))
def test_every_endpoint_but_healthz_needs_a_valid_key(served: Served, credentials: str) -> None:
    endpoints = protected_endpoints()
    assert len(endpoints) >= 14
    for method, path in endpoints:
        url = concrete(path, index="a", job_id=served.job_a)
        response = request(served.client, method, url, WRONG[credentials])
        assert is_contract_error(response, status=401, code="unauthorized"), (method, url)
        assert response.headers.get("www-authenticate") == "Bearer", (method, url)


SCHEMA_PAGES = ("/openapi.json", "/docs", "/redoc")


def test_the_schema_and_its_viewers_need_a_key(served: Served) -> None:
    """They were served to anyone although the HTTP API reference said every endpoint needs
    one."""
    for path in SCHEMA_PAGES:
        for credentials in WRONG.values():
            response = served.client.get(path, headers=credentials)
            assert is_contract_error(response, status=401, code="unauthorized"), path
    schema = served.client.get("/openapi.json", headers=A)
    assert schema.status_code == 200 and "/v1/indexes/{index}" in schema.json()["paths"]
    for path in SCHEMA_PAGES[1:]:
        page = served.client.get(path, headers=B)
        assert page.status_code == 200 and "/openapi.json" in page.text, path


def test_healthz_needs_no_key(served: Served) -> None:
    response = served.client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_key_a_is_refused_on_index_b(served: Served) -> None:
    refused = [e for e in protected_endpoints() if "{index}" in e[1] or "{job_id}" in e[1]]
    assert len(refused) >= 11
    for method, path in refused:
        url = concrete(path, index="b", job_id=served.job_b)
        response = request(served.client, method, url, A)
        assert is_contract_error(response, status=403, code="forbidden"), (method, url)
    response = served.client.get("/v1/jobs", params={"index": "b"}, headers=A)
    assert is_contract_error(response, status=403, code="forbidden")

    # nothing was changed by the refused requests
    assert served.client.get("/v1/indexes/b", headers=B).status_code == 200
    assert served.client.get(f"/v1/jobs/{served.job_b}", headers=B).json()["status"] == "queued"


def test_key_a_sees_only_its_indexes_and_jobs(served: Served) -> None:
    indexes = served.client.get("/v1/indexes", headers=A).raise_for_status().json()["indexes"]
    assert [info["name"] for info in indexes] == ["a"]
    jobs = served.client.get("/v1/jobs", headers=A).raise_for_status().json()["jobs"]
    assert {job["index"] for job in jobs} == {"a"} and served.job_a in {j["job_id"] for j in jobs}
    every = served.client.get("/v1/jobs", headers=B).raise_for_status().json()["jobs"]
    assert {job["index"] for job in every} >= {"a", "b"}


def test_key_a_works_on_index_a(served: Served) -> None:
    client = served.client
    assert client.put("/v1/indexes/a", headers=A).status_code == 200
    assert client.get("/v1/indexes/a", headers=A).status_code == 200
    assert upload(client, "a", DOC, filename="more.txt", headers=A).status_code == 202
    assert client.get(f"/v1/jobs/{served.job_a}", headers=A).status_code == 200
    assert client.post("/v1/indexes/a/search", json={"query": "tide"}, headers=A).status_code == 200


def test_key_b_works_everywhere(served: Served) -> None:
    client = served.client
    expected = {
        ("put", "/v1/indexes/{index}"): 200,
        ("get", "/v1/indexes"): 200,
        ("get", "/v1/indexes/{index}"): 200,
        ("post", "/v1/indexes/{index}/documents"): 202,
        ("get", "/v1/indexes/{index}/documents"): 200,
        ("get", "/v1/indexes/{index}/documents/{document_id}"): 404,  # no worker ran it
        ("delete", "/v1/indexes/{index}/documents/{document_id}"): 404,
        ("patch", "/v1/indexes/{index}/documents/{document_id}"): 404,
        ("get", "/v1/indexes/{index}/documents/{document_id}/chunks"): 404,
        ("delete", "/v1/indexes/{index}/documents"): 202,  # matched nothing
        ("post", "/v1/indexes/{index}/search"): 200,
        ("get", "/v1/indexes/{index}/search"): 200,
        ("get", "/v1/jobs/{job_id}"): 200,
        ("get", "/v1/jobs"): 200,
        ("delete", "/v1/jobs/{job_id}"): 202,  # cancels the queued job ...
        ("post", "/v1/jobs/{job_id}/retry"): 202,  # ... so that it can be retried
        ("get", "/readyz"): 200,
        ("get", "/metrics"): 200,
        ("get", "/healthz"): 200,
        ("put", "/v1/indexes/{index}/webhooks/{name}"): 201,
        ("get", "/v1/indexes/{index}/webhooks"): 200,
        ("get", "/v1/indexes/{index}/webhooks/{name}"): 200,
        ("get", "/v1/indexes/{index}/webhooks/{name}/deliveries"): 200,
        ("delete", "/v1/indexes/{index}/webhooks/{name}"): 204,
        ("put", "/v1/indexes/{index}/sources/{name}"): 201,
        ("get", "/v1/indexes/{index}/sources"): 200,
        ("get", "/v1/indexes/{index}/sources/{name}"): 200,
        ("post", "/v1/indexes/{index}/sources/{name}/sync"): 202,
        ("get", "/v1/indexes/{index}/sources/{name}/runs"): 200,
        ("delete", "/v1/indexes/{index}/sources/{name}/runs/{run_id}"): 404,  # no such run
        ("delete", "/v1/indexes/{index}/sources/{name}"): 204,
        ("post", "/v1/keys"): 201,
        ("get", "/v1/keys"): 200,
        ("delete", "/v1/keys/{id}"): 404,  # no such key
        ("delete", "/v1/indexes/{index}"): 204,
    }
    assert set(expected) == documented_endpoints(), "the table follows the contract"
    for (method, path), status in expected.items():  # in order: the index goes last
        url = concrete(path, index="b", job_id=served.job_b)
        response = request(client, method, url, B)
        assert response.status_code == status, (method, url, response.text)
    assert client.get("/v1/indexes/b", headers=B).status_code == 404


def test_a_limited_key_learns_no_other_index_from_an_error(served: Served) -> None:
    """Issue 40: a 403 for another index's job named that index."""
    for key, own, other, job in ((KA, "team-ka", "team-kb", served.job_kb),
                                 (KB, "team-kb", "team-ka", served.job_ka)):  # fmt: skip
        refused = [e for e in protected_endpoints() if "{index}" in e[1] or "{job_id}" in e[1]]
        for method, path in refused:
            url = concrete(path, index=other, job_id=job)
            response = request(served.client, method, url, key)
            assert is_contract_error(response, status=403, code="forbidden"), (method, url)
            if "{job_id}" in path:  # the caller named no index: the answer must not either
                assert other not in response.text, (method, url, response.text)
        listed = served.client.get("/v1/jobs", params={"index": other}, headers=key)
        assert is_contract_error(listed, status=403, code="forbidden")
        mine = served.client.get("/v1/jobs", headers=key).raise_for_status().text
        indexes = served.client.get("/v1/indexes", headers=key).raise_for_status().text
        assert own in mine and own in indexes
        assert other not in mine and other not in indexes


def test_metrics_need_a_key_not_limited_to_some_indexes(served: Served) -> None:
    """Issue 40: /metrics answered a key limited to one index with every index's name and
    usage. It reports on all of them (docs/reference/http-api.md, "Operations")."""
    for key in (A, KA, KB):
        response = served.client.get("/metrics", headers=key)
        assert is_contract_error(response, status=403, code="forbidden")
        assert "team-k" not in response.text and "index=" not in response.text
    full = served.client.get("/metrics", headers=B)
    assert full.status_code == 200 and "docingest_jobs" in full.text
    # a limited key reads its own index's usage instead
    own = served.client.get("/v1/indexes/team-ka", headers=KA).raise_for_status().json()
    assert "usage" in own
