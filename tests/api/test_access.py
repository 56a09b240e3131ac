"""Access control through real uvicorn and a real worker: keys made and revoked at run time,
roles and the principals header, access lists set at upload and by PATCH, and each read path
answering a hidden document or job exactly as a missing one (docs/reference/http-api.md,
"v1.3 — access control"). The random comparisons of every read path are in
tests/api/test_access_leaks.py and tests/pipeline/test_access_leaks.py."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.support.api_app import api_with_worker, is_contract_error, upload
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import private_redis, unique_prefix
from tests.support.settings import FAKE_DIMENSIONS, service_settings
from tests.support.waiting import wait_until

ADMIN_KEY = f"admin-{uuid.uuid4().hex}"
SERVICE_KEY = f"service-{uuid.uuid4().hex}"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
SERVICE = {"Authorization": f"Bearer {SERVICE_KEY}"}
INDEX = "intranet"
LEGAL_TEXT = b"Harbour lease terms: the quay rent rises in March, says the legal memo."
HR_TEXT = b"Harbour staffing: the quay crew grows in March, says the hr memo."
OPEN_TEXT = b"Harbour news: the quay opens in March for every visitor."


@dataclass
class Served:
    client: httpx.Client

    def key(self, role: str, principals: list[str] | None = None, **body: Any) -> dict[str, str]:
        """Make a run-time key; return its Authorization header."""
        made = self.client.post(
            "/v1/keys",
            json={"name": f"{role}-key", "role": role, "principals": principals or [], **body},
            headers=ADMIN,
        )
        assert made.status_code == 201, made.text
        return {"Authorization": f"Bearer {made.json()['key']}"}

    def ingest(self, document_id: str, data: bytes, access: list[str] | None) -> str:
        fields = {"document_id": document_id}
        if access is not None:
            fields["access"] = json.dumps(access)
        accepted = upload(self.client, INDEX, data, headers=ADMIN, **fields)
        assert accepted.status_code == 202, accepted.text
        job_id: str = accepted.json()["job_id"]
        self.wait(job_id)
        return job_id

    def wait(self, job_id: str) -> dict[str, Any]:
        found: list[dict[str, Any]] = []

        def done() -> bool:
            found[:] = [self.client.get(f"/v1/jobs/{job_id}", headers=ADMIN).json()]
            return found[0]["status"] in ("completed", "failed", "cancelled")

        wait_until(done, timeout=120, what=f"job {job_id} ending")
        assert found[0]["status"] == "completed", found[0]
        return found[0]

    def search(self, headers: dict[str, str], mode: str = "hybrid") -> list[str]:
        answer = self.client.post(
            f"/v1/indexes/{INDEX}/search",
            json={"query": "harbour quay March", "top_k": 10, "mode": mode},
            headers=headers,
        )
        assert answer.status_code == 200, answer.text
        return sorted({result["document_id"] for result in answer.json()["results"]})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    prefix = unique_prefix("access")
    api_keys = [
        {"key": ADMIN_KEY, "name": "operator"},
        {"key": SERVICE_KEY, "name": "portal", "role": "service"},
    ]
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as fake, private_redis(prefix):
        settings = service_settings(
            tmp_path_factory.mktemp("access"), prefix, fake, api_keys=api_keys
        )
        with api_with_worker(settings, name="access") as client:
            served = Served(client)
            assert client.put(f"/v1/indexes/{INDEX}", headers=ADMIN).status_code == 201
            served.ingest("legal.txt", LEGAL_TEXT, ["group:legal"])
            served.ingest("hr.txt", HR_TEXT, ["group:hr", "user:ana"])
            served.ingest("open.txt", OPEN_TEXT, None)
            yield served


def test_keys_are_made_listed_without_secrets_and_revoked(served: Served) -> None:
    client = served.client
    made = client.post(
        "/v1/keys",
        json={"name": "ana", "role": "user", "indexes": [INDEX], "principals": ["user:ana"]},
        headers=ADMIN,
    )
    assert made.status_code == 201, made.text
    body = made.json()
    assert set(body) == {"id", "name", "role", "indexes", "principals", "created_at", "key"}
    secret, key_id = body["key"], body["id"]
    listed = client.get("/v1/keys", headers=ADMIN).raise_for_status().json()["keys"]
    mine = [key for key in listed if key["id"] == key_id]
    assert mine and "key" not in mine[0] and secret not in json.dumps(listed)
    ana = {"Authorization": f"Bearer {secret}"}
    assert served.search(ana) == ["hr.txt", "open.txt"]
    assert client.delete(f"/v1/keys/{key_id}", headers=ADMIN).status_code == 204
    refused = client.post(f"/v1/indexes/{INDEX}/search", json={"query": "x"}, headers=ana)
    assert is_contract_error(refused, status=401, code="unauthorized")
    again = client.delete(f"/v1/keys/{key_id}", headers=ADMIN)
    assert is_contract_error(again, status=404, code="api_key_not_found")


def test_only_an_admin_of_every_index_manages_keys(served: Served) -> None:
    client = served.client
    limited_admin = served.key("admin", indexes=[INDEX])
    user = served.key("user", ["user:bo"])
    for headers in (SERVICE, user, limited_admin):
        for method, path in (("post", "/v1/keys"), ("get", "/v1/keys"), ("delete", "/v1/keys/x")):
            body = {"name": "x", "role": "admin"} if method == "post" else None
            answer = client.request(method.upper(), path, json=body, headers=headers)
            assert is_contract_error(answer, status=403, code="forbidden"), (method, path)


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "role": "user", "principals": ["alice"]},
        {"name": "x", "role": "user", "principals": ["user:"]},
        {"name": "x", "role": "user", "principals": ["group:a\nb"]},
        {"name": "x", "role": "service", "principals": ["user:ana"]},
    ],
)
def test_a_key_with_bad_principals_is_refused(served: Served, body: dict[str, Any]) -> None:
    answer = served.client.post("/v1/keys", json=body, headers=ADMIN)
    assert is_contract_error(answer, status=400, code="invalid_access")


def test_each_role_sees_what_its_principals_allow(served: Served) -> None:
    legal = {**SERVICE, "X-Docingest-Principals": "group:legal"}
    ana = served.key("user", ["user:ana"])
    for mode in ("hybrid", "vector", "keyword"):
        assert served.search(ADMIN, mode) == ["hr.txt", "legal.txt", "open.txt"]
        assert served.search(SERVICE, mode) == ["open.txt"]  # no header: public only
        assert served.search(legal, mode) == ["legal.txt", "open.txt"]
        assert served.search(ana, mode) == ["hr.txt", "open.txt"]
    # an admin naming principals reads as they would
    narrowed = {**ADMIN, "X-Docingest-Principals": '["group:hr"]'}
    assert served.search(narrowed) == ["hr.txt", "open.txt"]
    # a user key may not name principals
    answer = served.client.post(
        f"/v1/indexes/{INDEX}/search",
        json={"query": "harbour"},
        headers={**ana, "X-Docingest-Principals": "group:legal"},
    )
    assert is_contract_error(answer, status=403, code="forbidden")


def test_listing_counts_and_documents_show_only_what_is_visible(served: Served) -> None:
    client = served.client
    ana = served.key("user", ["user:ana"])
    listed = client.get(f"/v1/indexes/{INDEX}/documents", headers=ana).json()["documents"]
    assert [d["document_id"] for d in listed] == ["hr.txt", "open.txt"]
    assert listed[0]["access"] == ["group:hr", "user:ana"] and listed[1]["access"] is None
    paged = client.get(f"/v1/indexes/{INDEX}/documents", params={"limit": 1}, headers=ana)
    assert [d["document_id"] for d in paged.json()["documents"]] == ["hr.txt"]
    mine = client.get(f"/v1/indexes/{INDEX}", headers=ana).json()
    every = client.get(f"/v1/indexes/{INDEX}", headers=ADMIN).json()
    assert mine["documents"] == 2 and every["documents"] == 3
    assert mine["chunks"] < every["chunks"]
    listed_indexes = client.get("/v1/indexes", headers=ana).json()["indexes"]
    assert [i["documents"] for i in listed_indexes if i["name"] == INDEX] == [2]


def test_a_hidden_document_answers_exactly_as_a_missing_one(served: Served) -> None:
    client = served.client
    served.ingest("secret.txt", b"Harbour secret: the quay vault code.", ["group:board"])
    ana = served.key("user", ["user:ana"])
    doc = f"/v1/indexes/{INDEX}/documents/secret.txt"
    hidden = {
        "get": client.get(doc, headers=ana),
        "chunks": client.get(f"{doc}/chunks", headers=ana),
        "patch": client.patch(doc, json={"metadata": {"a": 1}}, headers=ana),
        "delete": client.delete(doc, headers=ana),
    }
    assert client.get(doc, headers=ADMIN).status_code == 200  # still there
    assert client.delete(doc, headers=ADMIN).status_code == 204
    missing = {
        "get": client.get(doc, headers=ana),
        "chunks": client.get(f"{doc}/chunks", headers=ana),
        "patch": client.patch(doc, json={"metadata": {"a": 1}}, headers=ana),
        "delete": client.delete(doc, headers=ana),
    }
    for path, answer in hidden.items():
        assert is_contract_error(answer, status=404, code="document_not_found"), path
        assert (answer.status_code, answer.json()) == (
            missing[path].status_code,
            missing[path].json(),
        ), path


def test_jobs_of_hidden_documents_answer_as_missing_jobs(served: Served) -> None:
    client = served.client
    job_id = served.ingest("board.txt", b"Harbour board minutes on the quay.", ["group:board"])
    ana = served.key("user", ["user:ana"])
    hidden = client.get(f"/v1/jobs/{job_id}", headers=ana)
    assert is_contract_error(hidden, status=404, code="job_not_found")
    absent = "0" * 32
    missing = client.get(f"/v1/jobs/{absent}", headers=ana)
    assert hidden.json()["error"]["message"] == missing.json()["error"]["message"].replace(
        absent, job_id
    )
    for answer in (
        client.delete(f"/v1/jobs/{job_id}", headers=ana),
        client.post(f"/v1/jobs/{job_id}/retry", headers=ana),
    ):
        assert is_contract_error(answer, status=404, code="job_not_found")
    listed = client.get("/v1/jobs", params={"index": INDEX}, headers=ana).json()["jobs"]
    assert job_id not in {job["job_id"] for job in listed}
    assert {job["document_id"] for job in listed} <= {"hr.txt", "open.txt", "open.txt-nope"}
    # a short page is filled from further back, past the newest (hidden) job
    page = client.get("/v1/jobs", params={"index": INDEX, "limit": 2}, headers=ana).json()
    assert len(page["jobs"]) == 2 and job_id not in {job["job_id"] for job in page["jobs"]}
    assert client.get(f"/v1/jobs/{job_id}", headers=ADMIN).json()["access"] == ["group:board"]


def test_a_patch_changes_who_sees_without_re_embedding(served: Served) -> None:
    client = served.client
    served.ingest("plan.txt", b"Harbour plan for the quay in March.", ["group:legal"])
    legal = {**SERVICE, "X-Docingest-Principals": "group:legal"}
    hr = {**SERVICE, "X-Docingest-Principals": "group:hr"}
    doc = f"/v1/indexes/{INDEX}/documents/plan.txt"
    before = client.get(doc, headers=ADMIN).json()
    assert "plan.txt" in served.search(legal) and "plan.txt" not in served.search(hr)
    # one who may only read (public on the list) may not change it
    patched = client.patch(doc, json={"access": ["group:legal", "public"]}, headers=legal)
    assert patched.status_code == 200, patched.text
    assert patched.json()["access"] == ["group:legal", "public"]
    assert patched.json()["version"] == before["version"] + 1
    refused = client.patch(doc, json={"access": ["group:hr"]}, headers=hr)
    assert is_contract_error(refused, status=403, code="forbidden")
    refused = client.delete(doc, headers=hr)
    assert is_contract_error(refused, status=403, code="forbidden")
    both = client.patch(doc, json={"metadata": {"k": "v"}, "access": ["group:hr"]}, headers=legal)
    assert both.status_code == 200 and both.json()["metadata"] == {"k": "v"}
    assert "plan.txt" in served.search(hr) and "plan.txt" not in served.search(legal)
    bad = client.patch(doc, json={"access": ["everyone"]}, headers=ADMIN)
    assert is_contract_error(bad, status=400, code="invalid_access")
    assert client.delete(doc, headers=hr).status_code == 204


def test_an_upload_may_not_replace_a_document_its_key_may_not_change(served: Served) -> None:
    client = served.client
    ana = served.key("user", ["user:ana"])
    for target in ("legal.txt", "open.txt-nope"):
        answer = upload(client, INDEX, b"overwrite", headers=ana, document_id=target)
        if target == "legal.txt":  # hidden from ana: refused, and nothing queued
            assert is_contract_error(answer, status=403, code="forbidden")
        else:  # a new document: accepted
            assert answer.status_code == 202
            served.wait(answer.json()["job_id"])
    bad = upload(client, INDEX, b"x", headers=ADMIN, access='["nobody"]')
    assert is_contract_error(bad, status=400, code="invalid_access")
    # a re-upload without `access` keeps the stored list
    job = upload(client, INDEX, LEGAL_TEXT + b" Again.", headers=ADMIN, document_id="legal.txt")
    served.wait(job.json()["job_id"])
    shown = client.get(f"/v1/indexes/{INDEX}/documents/legal.txt", headers=ADMIN).json()
    assert shown["access"] == ["group:legal"]


def test_admin_only_endpoints_refuse_other_roles(served: Served) -> None:
    client = served.client
    for headers in (SERVICE, served.key("user", ["user:ana"])):
        for method, path in (
            ("delete", f"/v1/indexes/{INDEX}"),
            ("get", f"/v1/indexes/{INDEX}/webhooks"),
        ):
            answer = client.request(method.upper(), path, headers=headers)
            assert is_contract_error(answer, status=403, code="forbidden"), path
        answer = client.put(f"/v1/indexes/{INDEX}", json={"access": "open"}, headers=headers)
        assert answer.status_code == 200  # the same setting: nothing changes
        answer = client.put(f"/v1/indexes/{INDEX}", json={"access": "restricted"}, headers=headers)
        assert is_contract_error(answer, status=403, code="forbidden")
    assert client.get(f"/v1/indexes/{INDEX}", headers=ADMIN).json()["access"] == "open"
