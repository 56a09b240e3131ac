"""Jobs read by callers whose view the store decides, while PostgreSQL does not answer.

Jobs live in Redis, but whether a caller that is not an admin may see one is read from the
store (`docingest.pipeline.jobs.visibility`): while a private PostgreSQL of the test's own is
stopped, such a caller's `GET /v1/jobs` and `GET /v1/jobs/{id}` answer 503
`dependency_unavailable` (never a 500, never a job it may not see), an admin's still answer
from Redis, and both answer as before once the server is back. Real uvicorn, a real worker,
Redis on DB 15 and the fake embedding server."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.support.api_app import api_with_worker, is_contract_error, upload
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.engines import schema_for, stop_postgres, stoppable_postgres
from tests.support.redis_db import private_redis, unique_prefix
from tests.support.settings import FAKE_DIMENSIONS, service_settings
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from pgserver import PostgresServer

ADMIN_KEY = f"admin-{uuid.uuid4().hex}"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
INDEX = "harbour"


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    with stoppable_postgres() as server:
        yield server


def finished(client: httpx.Client, job_id: str) -> dict[str, object]:
    found: list[dict[str, object]] = []

    def done() -> bool:
        found[:] = [client.get(f"/v1/jobs/{job_id}", headers=ADMIN).json()]
        return found[0]["status"] in ("completed", "failed", "cancelled")

    wait_until(done, timeout=120, what=f"job {job_id} ending")
    return found[0]


def test_a_readers_jobs_answer_503_while_the_store_is_down_and_an_admins_do_not(
    server: PostgresServer, tmp_path: Path
) -> None:
    prefix = unique_prefix("jobs-down")
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as fake, private_redis(prefix):
        settings = service_settings(
            tmp_path,
            prefix,
            fake,
            api_keys=[{"key": ADMIN_KEY, "name": "operator"}],
            qdrant_url=None,
            database_url=server.get_uri(),
            database_schema=schema_for(tmp_path),
            database_pool_timeout_seconds=2,
        )
        with api_with_worker(settings, name="jobs-down") as client:
            assert client.put(f"/v1/indexes/{INDEX}", headers=ADMIN).status_code == 201
            made = client.post(
                "/v1/keys",
                json={"name": "ana", "role": "user", "principals": ["user:ana"]},
                headers=ADMIN,
            )
            assert made.status_code == 201, made.text
            ana = {"Authorization": f"Bearer {made.json()['key']}"}
            accepted = upload(
                client,
                INDEX,
                b"The quay opens in March.",
                headers=ADMIN,
                document_id="quay.txt",
                access=json.dumps(["user:ana"]),
            )
            assert accepted.status_code == 202, accepted.text
            job_id = accepted.json()["job_id"]
            assert finished(client, job_id)["status"] == "completed"
            assert client.get(f"/v1/jobs/{job_id}", headers=ana).status_code == 200

            stop_postgres(server)
            listed = client.get("/v1/jobs", params={"index": INDEX}, headers=ana)
            assert is_contract_error(listed, status=503, code="dependency_unavailable")
            one = client.get(f"/v1/jobs/{job_id}", headers=ana)
            assert is_contract_error(one, status=503, code="dependency_unavailable")
            by_admin = client.get("/v1/jobs", params={"index": INDEX}, headers=ADMIN)
            assert by_admin.status_code == 200, by_admin.text
            assert [job["job_id"] for job in by_admin.json()["jobs"]] == [job_id]

            server.ensure_postgres_running()
            wait_until(
                lambda: client.get("/v1/jobs", headers=ana).status_code == 200,
                timeout=120,
                what="the reader's job list once the store is back",
            )
            back = client.get("/v1/jobs", params={"index": INDEX}, headers=ana).json()
            assert [job["job_id"] for job in back["jobs"]] == [job_id]
