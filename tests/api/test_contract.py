"""The app against its contract, docs/reference/http-api.md: every documented endpoint in the
OpenAPI schema and every served one documented, no planned one served yet, and the
error shape `{"error": {"code", "message"}}` for each kind of failure, through real uvicorn."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from redis import Redis

from docingest.pipeline.document import DocumentFormat
from docingest.pipeline.settings import Settings
from tests.support.api_app import (
    API_DOC,
    api_client,
    documented_endpoints,
    is_contract_error,
    planned_endpoints,
    upload,
)
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import private_redis, unique_prefix
from tests.support.settings import FAKE_DIMENSIONS, service_settings

MAX_UPLOAD = 4096


@dataclass
class Served:
    client: httpx.Client
    settings: Settings
    redis: Redis


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    prefix = unique_prefix("contract")
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as fake, private_redis(prefix) as redis:
        settings = service_settings(
            tmp_path_factory.mktemp("contract"), prefix, fake, max_upload_bytes=MAX_UPLOAD
        )
        with api_client(settings) as client:
            yield Served(client, settings, redis)


@pytest.fixture
def client(served: Served) -> httpx.Client:
    return served.client


def test_the_parser_finds_the_documented_endpoints() -> None:
    endpoints = documented_endpoints()
    assert ("put", "/v1/indexes/{index}") in endpoints
    assert ("get", "/v1/jobs") in endpoints, "the query string is not part of the path"
    assert ("get", "/healthz") in endpoints
    assert len(endpoints) >= 15


def test_openapi_has_every_documented_endpoint(client: httpx.Client) -> None:
    schema = client.get("/openapi.json").raise_for_status().json()
    served = {(method, path) for path, ops in schema["paths"].items() for method in ops}
    missing = documented_endpoints() - served
    assert not missing, f"documented but not in /openapi.json: {sorted(missing)}"


def test_every_served_endpoint_is_documented(client: httpx.Client) -> None:
    schema = client.get("/openapi.json").raise_for_status().json()
    served = {(method, path) for path, ops in schema["paths"].items() for method in ops}
    # The schema's own viewers are pages for people, not part of the API.
    undocumented = served - documented_endpoints() - {("get", "/docs"), ("get", "/redoc")}
    assert not undocumented, f"served but not in {API_DOC.name}: {sorted(undocumented)}"


def test_the_planned_endpoints_are_not_served_yet(client: httpx.Client) -> None:
    """An endpoint that lands moves from the contract's planned part into the served part."""
    schema = client.get("/openapi.json").raise_for_status().json()
    served = {(method, path) for path, ops in schema["paths"].items() for method in ops}
    planned = planned_endpoints() - documented_endpoints()  # extensions of served ones aside
    # Everything planned for v1.3 has landed; a planned part, when there is one again,
    # lists endpoints that must not be served yet.
    landed = planned & served
    assert not landed, f"served now, so document it above the planned part: {sorted(landed)}"


def test_unknown_route(client: httpx.Client) -> None:
    assert is_contract_error(client.get("/v1/no-such-thing"), status=404, code="not_found")


def test_unknown_job(client: httpx.Client) -> None:
    response = client.get("/v1/jobs/0123456789abcdef")
    assert is_contract_error(response, status=404, code="job_not_found")


@pytest.mark.parametrize("name", ["Upper", "has.dot", "x" * 65])
def test_bad_index_name(client: httpx.Client, name: str) -> None:
    response = client.put(f"/v1/indexes/{name}")
    assert is_contract_error(response, status=422, code="invalid_index_name")
    assert is_contract_error(upload(client, name, b"hello"), status=422, code="invalid_index_name")


def test_validation_error(client: httpx.Client) -> None:
    response = client.post("/v1/indexes/docs/search", json={"query": 5, "top_k": "many"})
    assert is_contract_error(response, status=422, code="validation_error")
    assert is_contract_error(client.get("/v1/jobs?limit=0"), status=422, code="validation_error")


@pytest.mark.parametrize(
    "embedding", [{"provider": "cohere"}, {"provider": "cohere", "dimensions": 8}]
)
def test_unknown_embedding_provider(client: httpx.Client, embedding: dict[str, object]) -> None:
    """Refused as invalid, with the names that are known, even when nothing would be built."""
    response = client.put("/v1/indexes/unknown-provider", json={"embedding": embedding})
    assert is_contract_error(response, status=422, code="validation_error")
    assert "'cohere'" in response.json()["error"]["message"]
    assert "local, openai" in response.json()["error"]["message"]
    assert client.get("/v1/indexes/unknown-provider").status_code == 404


@pytest.mark.parametrize(
    "embedding",
    [
        {"provider": "local", "model": "nonexistent-model"},  # was a 500 (ValueError)
        {"provider": "local", "dimensions": 5},  # was a 201, then every upload failed
        {"provider": "local", "model": "nonexistent-model", "dimensions": 384},
    ],
)
def test_an_embedding_the_local_provider_cannot_build_is_refused_at_put(
    client: httpx.Client, embedding: dict[str, object]
) -> None:
    """422 naming the bundled model and its dimensions; no index is created."""
    response = client.put("/v1/indexes/bad-local", json={"embedding": embedding})
    assert is_contract_error(response, status=422, code="validation_error")
    message = response.json()["error"]["message"]
    assert "all-MiniLM-L6-v2" in message and "384 dimensions" in message, message
    assert client.get("/v1/indexes/bad-local").status_code == 404


@pytest.mark.parametrize("threshold", ["NaN", "Infinity", "-Infinity"])
def test_a_score_threshold_that_is_not_a_number_is_refused(
    client: httpx.Client, threshold: str
) -> None:
    """NaN and Infinity (which Python's JSON parser accepts) were a 200 with no results."""
    body = '{"query": "tide", "score_threshold": ' + threshold + "}"
    headers = {"Content-Type": "application/json"}
    response = client.post("/v1/indexes/docs/search", content=body, headers=headers)
    assert is_contract_error(response, status=422, code="validation_error")
    assert "score_threshold" in response.json()["error"]["message"]


def test_chunk_size_is_bounded_at_put(client: httpx.Client) -> None:
    """War and Peace in one chunk (chunk_size 100,000,000) was accepted."""
    response = client.put("/v1/indexes/huge-chunks", json={"chunking": {"chunk_size": 10**8}})
    assert is_contract_error(response, status=422, code="validation_error")
    assert "chunking.chunk_size" in response.json()["error"]["message"]
    assert "32768" in response.json()["error"]["message"]
    assert client.get("/v1/indexes/huge-chunks").status_code == 404


def test_invalid_metadata(client: httpx.Client) -> None:
    response = upload(client, "docs", b"some notes", metadata="{not json")
    assert is_contract_error(response, status=400, code="invalid_metadata")
    response = upload(client, "docs", b"some notes", metadata='["a list"]')
    assert is_contract_error(response, status=400, code="invalid_metadata")


def test_oversize_upload(client: httpx.Client) -> None:
    response = upload(client, "docs", b"x" * (MAX_UPLOAD + 1))
    assert is_contract_error(response, status=413, code="upload_too_large")


def test_empty_upload(client: httpx.Client) -> None:
    response = upload(client, "docs", b"")
    assert is_contract_error(response, status=400, code="empty_document")


def test_refused_uploads_leave_no_staged_file(served: Served) -> None:
    for response in (
        upload(served.client, "docs", b""),
        upload(served.client, "docs", b"x" * (MAX_UPLOAD + 1)),
        upload(served.client, "docs", b"some notes", metadata="{"),
    ):
        assert response.status_code in (400, 413)
    assert list(served.settings.staging_dir.iterdir()) == []


def test_a_server_error_shows_no_traceback(served: Served) -> None:
    """A job key clobbered in Redis (a string, not a hash) makes reading it fail unexpectedly."""
    served.redis.set(f"{served.settings.redis_key_prefix}job:clobbered", "not a hash")
    response = served.client.get("/v1/jobs/clobbered")
    assert is_contract_error(response, status=500, code="internal_error")
    for leak in ("Traceback", 'File "', "WRONGTYPE", "ResponseError", "redis"):
        assert leak not in response.text


def test_every_format_the_contract_names_is_a_detected_format() -> None:
    text = API_DOC.read_text(encoding="utf-8")
    section = text.split("### Formats\n", 1)[1].split("\n### ", 1)[0]
    named = set(re.findall(r"`([a-z]+)`", section)) - {"page"}  # a result's field
    assert named == {"doc", "xls", "ppt", "rtf", "msg", "ods", "odp", "mbox", "eml"}
    assert named <= {str(fmt) for fmt in DocumentFormat}
