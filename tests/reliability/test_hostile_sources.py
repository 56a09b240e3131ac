"""Sources that misbehave get a status, not a crash: a site that answers 500 or never
answers, a huge page, an endless calendar of links, a redirect loop, a file no parser knows,
an S3 endpoint that refuses connections, refused S3 credentials, a folder that is gone, and
targets on private addresses. One item that fails fails alone; the run goes on and counts
it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import boto3
import httpx
import pytest

from tests.support.api_app import api_client, is_contract_error
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.hanging_server import HangingServer
from tests.support.redis_db import private_redis, unique_prefix
from tests.support.s3_server import ACCESS_KEY, SECRET_KEY, s3_server
from tests.support.settings import FAKE_DIMENSIONS, service_settings
from tests.support.sources import deployment_with_sources, sync_and_wait
from tests.support.web_site import TestSite, page

ITEM_LIMIT = 256 * 1024


@pytest.fixture(scope="module")
def folder_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile-root")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, folder_root: Path) -> Iterator[httpx.Client]:
    prefix = unique_prefix("hostile-sources")
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as fake, private_redis(prefix):
        settings = service_settings(
            tmp_path_factory.mktemp("hostile-sources"),
            prefix,
            fake,
            source_folder_roots=[str(folder_root)],
            sources_allow_private=True,
            source_poll_seconds=0.05,
            source_request_timeout_seconds=1.0,
            source_max_item_bytes=ITEM_LIMIT,
        )
        with deployment_with_sources(settings, name="hostile-sources") as deployment:
            yield deployment.client


def _web(client: httpx.Client, index: str, url: str, **config: object) -> None:
    body = {"type": "web", "config": {"start_urls": [url], "delay_seconds": 0, **config}}
    answer = client.put(f"/v1/indexes/{index}/sources/site", json=body)
    assert answer.status_code == 201, answer.text


def test_hostile_pages_fail_alone_and_the_run_goes_on(client: httpx.Client) -> None:
    with TestSite() as site:
        site.pages.update(
            {
                "/": page(
                    "Home",
                    "/ok.html",
                    "/loop-a",
                    "/huge.html",
                    "/blob.bin",
                    "/error.html",
                    "/calendar/1",
                ),
                "/ok.html": page("Fine", body="A page about guanacos that works."),
                "/blob.bin": ("application/x-never-heard-of", b"\x00\x01\x02\xff" * 1024),
            }
        )
        site.redirects.update({"/loop-a": "/loop-b", "/loop-b": "/loop-a"})
        site.status["/error.html"] = 500
        site.huge_bytes = 8 * ITEM_LIMIT
        site.calendar = True
        _web(client, "hostile", site.url + "/", max_pages=25, max_depth=50)
        run = sync_and_wait(client, "hostile", "site", timeout=300)
    assert run["status"] == "completed", run
    counts = run["counts"]
    # The redirect loop, the huge page, the 500 and the file no parser knows (its job fails).
    assert counts["failed"] == 4, run
    assert counts["listed"] == 25, run  # the endless calendar stops at max_pages
    documents = client.get("/v1/indexes/hostile/documents", params={"limit": 100}).json()
    ids = {document["document_id"] for document in documents["documents"]}
    assert {site.url + "/", site.url + "/ok.html"} <= ids
    assert site.url + "/blob.bin" not in ids
    assert len(ids) == 25 - 4


def test_a_site_that_never_answers_fails_the_run(client: httpx.Client) -> None:
    hanging = HangingServer()
    try:
        _web(client, "hanging", hanging.url + "/")
        run = sync_and_wait(client, "hanging", "site", timeout=120)
    finally:
        hanging.close()
    assert run["status"] == "failed" and run["error"]["code"] == "source_unreachable", run


def test_a_site_that_answers_500_everywhere_fails_the_run(client: httpx.Client) -> None:
    with TestSite() as site:
        site.status["/"] = 500
        _web(client, "broken", site.url + "/")
        run = sync_and_wait(client, "broken", "site")
    assert run["status"] == "failed" and run["error"]["code"] == "source_error", run
    assert run["counts"]["failed"] == 1


def test_an_s3_endpoint_that_refuses_connections_fails_the_run(client: httpx.Client) -> None:
    hanging = HangingServer()
    closed = hanging.url
    hanging.close()  # nothing listens there now
    config = {"bucket": "any-bucket", "endpoint_url": closed, "access_key_id": "a"}
    body = {"type": "s3", "config": {**config, "secret_access_key": "b"}}
    assert client.put("/v1/indexes/nos3/sources/b", json=body).status_code == 201
    run = sync_and_wait(client, "nos3", "b", timeout=300)
    assert run["status"] == "failed" and run["error"]["code"] == "source_unreachable", run


def test_a_folder_that_is_gone_fails_the_run_and_deletes_nothing(
    client: httpx.Client, folder_root: Path
) -> None:
    folder = folder_root / "shared"
    folder.mkdir()
    (folder / "kept.txt").write_text("A note about vicunas that must survive.")
    body = {"type": "folder", "config": {"path": str(folder)}}
    assert client.put("/v1/indexes/gone/sources/f", json=body).status_code == 201
    assert sync_and_wait(client, "gone", "f")["counts"]["new"] == 1
    shutil.rmtree(folder)
    run = sync_and_wait(client, "gone", "f")
    assert run["status"] == "failed" and run["error"]["code"] == "folder_not_found", run
    assert client.get("/v1/indexes/gone").json()["documents"] == 1  # not pruned


def test_private_targets_are_refused_unless_allowed(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    prefix = unique_prefix("private-sources")
    with private_redis(prefix):
        settings = service_settings(tmp_path_factory.mktemp("private-sources"), prefix, None)
        with api_client(settings) as client:
            for body in (
                {"type": "web", "config": {"start_urls": ["http://127.0.0.1:9/"]}},
                {"type": "web", "config": {"sitemaps": ["http://169.254.169.254/s.xml"]}},
                {"type": "s3", "config": {"bucket": "b", "endpoint_url": "http://10.0.0.1"}},
                {"type": "s3", "config": {"bucket": "b", "endpoint_url": "http://[::1]:9000"}},
            ):
                answer = client.put("/v1/indexes/private/sources/s", json=body)
                assert is_contract_error(answer, status=400, code="invalid_source")
                assert "DOCINGEST_SOURCES_ALLOW_PRIVATE" in answer.json()["error"]["message"]


def test_refused_s3_credentials_fail_the_run_with_access_denied(client: httpx.Client) -> None:
    """moto checks signatures once its IAM emulation is on (`/moto-api/reset-auth`): a key it
    does not know, and a known key with a wrong secret, are both refused."""
    with s3_server() as s3:
        iam = boto3.client(
            "iam",
            endpoint_url=s3.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )
        iam.create_user(UserName="reader")
        iam.put_user_policy(
            UserName="reader",
            PolicyName="read",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
                }
            ),  # fmt: skip
        )
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        s3.client.create_bucket(Bucket="guarded-bucket")
        s3.client.put_object(Bucket="guarded-bucket", Key="a.txt", Body=b"Only for readers.")
        httpx.post(f"{s3.endpoint_url}/moto-api/reset-auth", content=b"0").raise_for_status()
        try:
            wrong_secret = {"access_key_id": key["AccessKeyId"], "secret_access_key": "wrong"}
            unknown_key = {"access_key_id": "AKIANOBODY0000000000", "secret_access_key": "x"}
            for name, credentials in (("secret", wrong_secret), ("key", unknown_key)):
                config = {"bucket": "guarded-bucket", "endpoint_url": s3.endpoint_url}
                body = {"type": "s3", "config": config | credentials}
                assert (
                    client.put(f"/v1/indexes/denied/sources/{name}", json=body).status_code == 201
                )
                run = sync_and_wait(client, "denied", name)
                assert run["status"] == "failed", run
                assert run["error"]["code"] == "access_denied", run
            granted = {
                "access_key_id": key["AccessKeyId"],
                "secret_access_key": key["SecretAccessKey"],
            }
            body = {
                "type": "s3",
                "config": {"bucket": "guarded-bucket", "endpoint_url": s3.endpoint_url} | granted,
            }
            assert client.put("/v1/indexes/denied/sources/good", json=body).status_code == 201
            run = sync_and_wait(client, "denied", "good")
            assert run["status"] == "completed" and run["counts"]["new"] == 1, run
        finally:
            httpx.post(f"{s3.endpoint_url}/moto-api/reset-auth", content=b"inf")
