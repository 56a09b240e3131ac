"""Access control under hostile or outsized input, through real uvicorn on both engines:
principals with quotes, commas and other odd characters; 10,000 principals on one document;
10,000 groups held by one caller; malformed principal headers; and a key revoked while its
request is under way. Each gets a clear answer (never a 500), and nothing hidden shows."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from docingest.pipeline.services import Services
from docingest.pipeline.settings import Settings
from docingest.workers.app import create_celery_app
from tests.pipeline.test_access_leaks import store_document
from tests.support.api_app import api_client, is_contract_error, upload
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.engines import ENGINES, engine_fields
from tests.support.redis_db import TestRedis
from tests.support.settings import service_settings
from tests.support.waiting import wait_until

ADMIN_KEY = f"hostile-admin-{uuid.uuid4().hex}"
SERVICE_KEY = f"hostile-service-{uuid.uuid4().hex}"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
SERVICE = {"Authorization": f"Bearer {SERVICE_KEY}"}
INDEX = "hostile-access"
ODD = [
    "user:o'brien",
    'group:say "hi"',
    "group:a,b",
    "user:ünï-cödé 文書",
    "group:\\backslash",
    "user:" + "x" * 256,
    "group:{}[]",
]


def settings_of(
    tmp_path: Path, redis_db: TestRedis, fake: FakeEmbeddingServer, engine: str
) -> Settings:
    api_keys = [{"key": ADMIN_KEY}, {"key": SERVICE_KEY, "role": "service"}]
    return service_settings(
        tmp_path, redis_db.prefix, fake, api_keys=api_keys, **engine_fields(engine, tmp_path)
    )


@pytest.fixture(params=ENGINES)
def api(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    redis_db: TestRedis,
    embedding_server: FakeEmbeddingServer,
) -> Iterator[tuple[httpx.Client, Services]]:
    settings = settings_of(tmp_path, redis_db, embedding_server, request.param)
    services = Services(settings, owns_store=True)
    services.ensure_index(INDEX)
    try:
        with api_client(settings, services=services, celery=create_celery_app(settings)) as http:
            yield http, services
    finally:
        services.close()


def search(http: httpx.Client, headers: dict[str, str]) -> set[str]:
    answer = http.post(
        f"/v1/indexes/{INDEX}/search", json={"query": "harbour", "top_k": 50}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    return {hit["document_id"] for hit in answer.json()["results"]}


def acting_for(*principals: str) -> dict[str, str]:
    return {**SERVICE, "X-Docingest-Principals": json.dumps(list(principals))}


def test_principals_with_quotes_and_commas_match_exactly(
    api: tuple[httpx.Client, Services],
) -> None:
    http, services = api
    for number, principal in enumerate(ODD):
        store_document(services, INDEX, f"odd-{number}", 1, [principal])
    for number, principal in enumerate(ODD):
        assert search(http, acting_for(principal)) == {f"odd-{number}"}, principal
        user = http.post(
            "/v1/keys", json={"name": "odd", "role": "user", "principals": [principal]},
            headers=ADMIN,
        )  # fmt: skip
        assert user.status_code == 201, user.text
        assert search(http, {"Authorization": f"Bearer {user.json()['key']}"}) == {f"odd-{number}"}
    # near misses match nothing: no prefix, case or quoting games
    for near in ("user:o", "group:say", "group:a", 'group:say \\"hi\\"', "user:O'BRIEN"):
        assert search(http, acting_for(near)) == set(), near
    # the comma form splits on commas (a JSON list keeps them): "b" is no principal
    split = http.post(
        f"/v1/indexes/{INDEX}/search",
        json={"query": "harbour"},
        headers={**SERVICE, "X-Docingest-Principals": "group:a,b"},
    )
    assert is_contract_error(split, status=400, code="invalid_access")
    both = {**SERVICE, "X-Docingest-Principals": "group:a, user:o'brien"}
    assert search(http, both) == {"odd-0"}  # ODD[0] is user:o'brien


@pytest.mark.parametrize(
    "header",
    [
        "[",  # not JSON
        '{"user:a": 1}',  # not a list
        '["user:a", 7]',  # not a string
        "alice",  # no prefix
        "user:",  # an empty id
        '["user:a\\u0007b"]',  # a control character, escaped in JSON (a raw one is no header)
        json.dumps([f"user:{n}" for n in range(10_001)]),  # too many
        "[" * 10_000,  # deep nesting
    ],
)
def test_a_malformed_principals_header_is_refused(
    api: tuple[httpx.Client, Services], header: str
) -> None:
    http, services = api
    store_document(services, INDEX, "secret", 1, ["group:board"])
    answer = http.post(
        f"/v1/indexes/{INDEX}/search",
        json={"query": "harbour"},
        headers={**SERVICE, "X-Docingest-Principals": header},
    )
    if answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_request":
        return  # uvicorn refused an oversized header before the app saw it
    assert is_contract_error(answer, status=400, code="invalid_access")


def test_ten_thousand_principals_on_one_document(api: tuple[httpx.Client, Services]) -> None:
    http, services = api
    store_document(services, INDEX, "crowded", 3, None)
    store_document(services, INDEX, "other", 2, ["group:other"])
    many = [f"user:member-{n:05d}" for n in range(10_000)]
    patched = http.patch(
        f"/v1/indexes/{INDEX}/documents/crowded", json={"access": many}, headers=ADMIN
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["access"] == many
    assert search(http, acting_for("user:member-09999")) == {"crowded"}
    assert search(http, acting_for("user:member-00000")) == {"crowded"}
    assert search(http, acting_for("user:member-10000")) == set()
    shown = http.get(f"/v1/indexes/{INDEX}/documents/crowded", headers=ADMIN).json()
    assert len(shown["access"]) == 10_000
    too_many = http.patch(
        f"/v1/indexes/{INDEX}/documents/crowded",
        json={"access": [*many, "user:one-more"]},
        headers=ADMIN,
    )
    assert is_contract_error(too_many, status=400, code="invalid_access")
    assert search(http, acting_for("user:member-04242")) == {"crowded"}  # unchanged


def test_ten_thousand_groups_on_one_caller(api: tuple[httpx.Client, Services]) -> None:
    http, services = api
    store_document(services, INDEX, "last-group", 2, ["group:g-09999"])
    store_document(services, INDEX, "no-group", 2, ["group:elsewhere"])
    groups = [f"group:g-{n:05d}" for n in range(10_000)]
    made = http.post(
        "/v1/keys", json={"name": "big", "role": "user", "principals": groups}, headers=ADMIN
    )
    assert made.status_code == 201, made.text[:300]
    big = {"Authorization": f"Bearer {made.json()['key']}"}
    assert search(http, big) == {"last-group"}
    for mode in ("vector", "keyword"):
        answer = http.post(
            f"/v1/indexes/{INDEX}/search",
            json={"query": "harbour", "top_k": 50, "mode": mode},
            headers=big,
        )
        assert {hit["document_id"] for hit in answer.json()["results"]} == {"last-group"}
    listed = http.get(f"/v1/indexes/{INDEX}/documents", headers=big).json()["documents"]
    assert [document["document_id"] for document in listed] == ["last-group"]
    assert http.get(f"/v1/indexes/{INDEX}", headers=big).json()["documents"] == 1
    too_many = http.post(
        "/v1/keys",
        json={"name": "bigger", "role": "user", "principals": [*groups, "group:extra"]},
        headers=ADMIN,
    )
    assert too_many.status_code in (400, 422), too_many.text[:300]


def test_a_key_revoked_while_its_upload_streams_is_refused_at_its_end(
    api: tuple[httpx.Client, Services],
) -> None:
    http, _ = api
    made = http.post("/v1/keys", json={"name": "doomed", "role": "admin"}, headers=ADMIN)
    assert made.status_code == 201
    doomed = {"Authorization": f"Bearer {made.json()['key']}"}
    key_id = made.json()["id"]
    boundary = uuid.uuid4().hex
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="document_id"\r\n\r\nlate.txt\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="late.txt"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    revoked = threading.Event()

    def body() -> Iterator[bytes]:
        yield head + b"Harbour notes, part one. " * 2000
        # the key is revoked while the request is under way (its body half sent)
        with httpx.Client(base_url=str(http.base_url), timeout=30) as other:
            assert other.delete(f"/v1/keys/{key_id}", headers=ADMIN).status_code == 204
        revoked.set()
        yield b"Harbour notes, part two. " * 2000
        yield f"\r\n--{boundary}--\r\n".encode()

    answer = http.post(
        f"/v1/indexes/{INDEX}/documents",
        content=body(),
        headers={**doomed, "Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert revoked.is_set()
    assert is_contract_error(answer, status=401, code="unauthorized")
    jobs = http.get("/v1/jobs", params={"index": INDEX}, headers=ADMIN).json()["jobs"]
    assert "late.txt" not in {job["document_id"] for job in jobs}  # nothing was queued
    after = http.get(f"/v1/indexes/{INDEX}", headers=doomed)
    assert is_contract_error(after, status=401, code="unauthorized")
    # a key revoked before a short request: refused at once, on this and every process
    fresh = http.post("/v1/keys", json={"name": "short", "role": "user"}, headers=ADMIN).json()
    assert http.delete(f"/v1/keys/{fresh['id']}", headers=ADMIN).status_code == 204
    gone = upload(http, INDEX, b"x", headers={"Authorization": f"Bearer {fresh['key']}"})
    assert is_contract_error(gone, status=401, code="unauthorized")


def test_a_key_revoked_on_one_api_process_is_refused_by_another(
    tmp_path: Path, redis_db: TestRedis, embedding_server: FakeEmbeddingServer
) -> None:
    """Two API processes' apps over one Redis: the second has just accepted the key (and
    keeps it for `CACHE_SECONDS`); once the first revokes it, the second refuses it too."""
    settings = settings_of(tmp_path, redis_db, embedding_server, "qdrant-client")
    with api_client(settings) as first, api_client(settings) as second:
        made = first.post("/v1/keys", json={"name": "k", "role": "user"}, headers=ADMIN).json()
        key = {"Authorization": f"Bearer {made['key']}"}
        assert second.get("/v1/indexes", headers=key).status_code == 200  # now cached there
        assert first.delete(f"/v1/keys/{made['id']}", headers=ADMIN).status_code == 204
        wait_until(
            lambda: second.get("/v1/indexes", headers=key).status_code == 401,
            timeout=60,
            what="the second process refusing the revoked key",
        )
        assert first.get("/v1/keys", headers=ADMIN).json()["keys"] == []
