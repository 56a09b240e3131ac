"""The webhook endpoints through real uvicorn: PUT (201, then 200), list and show without the
secret, DELETE, the delivery log, an upload's callback_url, and API-key scoping."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.support.api_app import api_client, is_contract_error, upload
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import private_redis, unique_prefix
from tests.support.settings import FAKE_DIMENSIONS, service_settings

KEY_A = f"key-a-{uuid.uuid4().hex}"
KEY_B = f"key-b-{uuid.uuid4().hex}"
A = {"Authorization": f"Bearer {KEY_A}"}
B = {"Authorization": f"Bearer {KEY_B}"}
SECRET = "a-secret-of-enough-length"
URL = "http://127.0.0.1:9/hook"
HOOK: dict[str, object] = {"url": URL, "events": ["job.completed"], "secret": SECRET}


def _no_secret_in(response: httpx.Response) -> None:
    response.read()
    assert SECRET not in response.text, f"{response.request.url} showed a webhook secret"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    prefix = unique_prefix("webhooks-api")
    api_keys = [
        {"key": KEY_A, "indexes": ["a"], "name": "team-a"},
        {"sha256": hashlib.sha256(KEY_B.encode()).hexdigest(), "name": "admin"},
    ]
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as fake, private_redis(prefix):
        settings = service_settings(
            tmp_path_factory.mktemp("webhooks-api"),
            prefix,
            fake,
            api_keys=api_keys,
            webhook_allow_private=True,
        )
        hooks = {"event_hooks": {"response": [_no_secret_in]}}
        with api_client(settings, client_options=hooks) as client:
            yield client


def test_put_creates_then_confirms_then_replaces(client: httpx.Client) -> None:
    created = client.put("/v1/indexes/a/webhooks/first", json=HOOK, headers=A)
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["name"], body["index"], body["url"]) == ("first", "a", URL)
    assert body["events"] == ["job.completed"] and body["secret"] is None
    again = client.put("/v1/indexes/a/webhooks/first", json=HOOK, headers=A)
    assert again.status_code == 200 and again.json()["created_at"] == body["created_at"]
    changed = dict(HOOK, events=["job.failed", "document.deleted", "job.failed"])
    replaced = client.put("/v1/indexes/a/webhooks/first", json=changed, headers=A)
    assert replaced.status_code == 200
    assert replaced.json()["events"] == ["document.deleted", "job.failed"]
    shown = client.get("/v1/indexes/a/webhooks/first", headers=A).raise_for_status().json()
    assert shown["events"] == ["document.deleted", "job.failed"] and "secret" not in shown


def test_an_omitted_secret_is_generated_and_shown_once(client: httpx.Client) -> None:
    body = {"url": URL, "events": ["job.failed"]}
    created = client.put("/v1/indexes/a/webhooks/generated", json=body, headers=A)
    assert created.status_code == 201
    secret = created.json()["secret"]
    assert secret.startswith("whsec_") and len(secret) > 30
    listed = client.get("/v1/indexes/a/webhooks", headers=A).raise_for_status()
    assert secret not in listed.text
    kept = client.put("/v1/indexes/a/webhooks/generated", json=body, headers=A)
    assert kept.status_code == 200 and kept.json()["secret"] is None  # kept, not shown


def test_list_and_delete(client: httpx.Client) -> None:
    for name in ("x1", "x2"):
        client.put(f"/v1/indexes/a/webhooks/{name}", json=HOOK, headers=A).raise_for_status()
    names = [w["name"] for w in client.get("/v1/indexes/a/webhooks", headers=A).json()["webhooks"]]
    assert {"x1", "x2"} <= set(names) and names == sorted(names)
    assert client.delete("/v1/indexes/a/webhooks/x1", headers=A).status_code == 204
    gone = client.delete("/v1/indexes/a/webhooks/x1", headers=A)
    assert is_contract_error(gone, status=404, code="webhook_not_found")
    missing = client.get("/v1/indexes/a/webhooks/x1/deliveries", headers=A)
    assert is_contract_error(missing, status=404, code="webhook_not_found")
    names = [w["name"] for w in client.get("/v1/indexes/a/webhooks", headers=A).json()["webhooks"]]
    assert "x1" not in names and "x2" in names


def test_a_key_may_not_touch_another_indexs_webhooks(client: httpx.Client) -> None:
    client.put("/v1/indexes/b/webhooks/theirs", json=HOOK, headers=B).raise_for_status()
    for method, path in (
        ("PUT", "/v1/indexes/b/webhooks/mine"),
        ("GET", "/v1/indexes/b/webhooks"),
        ("GET", "/v1/indexes/b/webhooks/theirs"),
        ("DELETE", "/v1/indexes/b/webhooks/theirs"),
        ("GET", "/v1/indexes/b/webhooks/theirs/deliveries"),
    ):
        response = client.request(method, path, json=HOOK if method == "PUT" else None, headers=A)
        assert is_contract_error(response, status=403, code="forbidden"), (method, path)
    assert client.get("/v1/indexes/b/webhooks/theirs", headers=B).status_code == 200


def test_an_upload_carries_its_callback_url(client: httpx.Client) -> None:
    accepted = upload(client, "a", b"Some notes.", headers=A, callback_url=URL,
                      callback_secret=SECRET)  # fmt: skip
    assert accepted.status_code == 202, accepted.text
    job = client.get(accepted.json()["status_url"], headers=A).raise_for_status().json()
    assert job["callback_url"] == URL
    alone = upload(client, "a", b"Some notes.", headers=A, callback_secret=SECRET)
    assert is_contract_error(alone, status=400, code="invalid_webhook")
    short = upload(client, "a", b"Notes.", headers=A, callback_url=URL,
                   callback_secret="short")  # fmt: skip
    assert is_contract_error(short, status=400, code="invalid_webhook")
    bad = upload(client, "a", b"Some notes.", headers=A, callback_url="ftp://example.com/x")
    assert is_contract_error(bad, status=400, code="invalid_webhook_url")


def test_the_delivery_log_of_a_new_webhook_is_empty(client: httpx.Client) -> None:
    client.put("/v1/indexes/a/webhooks/quiet", json=HOOK, headers=A).raise_for_status()
    log = client.get("/v1/indexes/a/webhooks/quiet/deliveries", headers=A).raise_for_status()
    assert log.json() == {"deliveries": []}


def test_metrics_show_the_outbox(client: httpx.Client) -> None:
    text = client.get("/metrics", headers=B).raise_for_status().text
    for name in (
        "docingest_webhook_deliveries_pending",
        'docingest_webhook_deliveries_total{status="delivered"}',
        "docingest_webhook_retries_total",
    ):
        assert name in text, name
