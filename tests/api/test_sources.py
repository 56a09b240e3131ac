"""The source endpoints through real uvicorn, a real worker and the source scheduler: PUT (201,
then 200), secrets write-only, refusals, runs of `folder` and `s3` sources that bring,
change, keep and delete documents (moto's S3 server on loopback), and a crawl cancelled
half-way (the test website)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.api_app import api_client, is_contract_error
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.redis_db import private_redis, unique_prefix
from tests.support.s3_server import SECRET_KEY, S3Server, s3_server
from tests.support.settings import FAKE_DIMENSIONS, service_settings
from tests.support.sources import deployment_with_sources, sync_and_wait, wait_for_run
from tests.support.waiting import wait_until
from tests.support.web_site import TestSite, page


@pytest.fixture(scope="module")
def folder_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sources-root")


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        yield server


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, folder_root: Path) -> Iterator[httpx.Client]:
    prefix = unique_prefix("sources-api")
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as fake, private_redis(prefix):
        settings = service_settings(
            tmp_path_factory.mktemp("sources-api"),
            prefix,
            fake,
            source_folder_roots=[str(folder_root)],
            sources_allow_private=True,
            source_poll_seconds=0.05,
        )

        def no_secret(response: httpx.Response) -> None:
            response.read()
            assert SECRET_KEY not in response.text, f"{response.request.url} showed a secret"

        with deployment_with_sources(settings, name="sources-api") as deployment:
            deployment.client.event_hooks["response"] = [no_secret]
            yield deployment.client


def _documents(client: httpx.Client, index: str) -> dict[str, dict[str, object]]:
    listed = client.get(f"/v1/indexes/{index}/documents").raise_for_status().json()
    return {doc["document_id"]: doc for doc in listed["documents"]}


def test_put_creates_then_confirms_and_hides_secrets(client: httpx.Client, s3: S3Server) -> None:
    body = {"type": "s3", "config": s3.config("put-bucket")}
    created = client.put("/v1/indexes/srcput/sources/bucket", json=body)
    assert created.status_code == 201, created.text
    shown = created.json()
    assert shown["config"]["secret_access_key"] == "***"
    assert shown["config"]["access_key_id"] == "test-access-key"
    assert (shown["state"], shown["last_run"], shown["next_run_at"]) == ("idle", None, None)
    again = client.put("/v1/indexes/srcput/sources/bucket", json=body)
    assert again.status_code == 200 and again.json()["created_at"] == shown["created_at"]
    # Sending the mask back keeps the stored secret (the answer is 200: nothing changed).
    masked = {"type": "s3", "config": dict(s3.config("put-bucket"), secret_access_key="***")}
    kept = client.put("/v1/indexes/srcput/sources/bucket", json=masked)
    assert kept.status_code == 200, kept.text
    listed = client.get("/v1/indexes/srcput/sources").raise_for_status().json()
    assert [source["name"] for source in listed["sources"]] == ["bucket"]
    assert client.delete("/v1/indexes/srcput/sources/bucket").status_code == 204
    assert is_contract_error(
        client.get("/v1/indexes/srcput/sources/bucket"), status=404, code="source_not_found"
    )


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"type": "ftp", "config": {}}, "invalid_source"),
        ({"type": "s3", "config": {"bucket": "b", "colour": "red"}}, "invalid_source"),
        ({"type": "folder", "config": {"path": "/etc"}}, "invalid_source"),
        ({"type": "folder", "config": {"path": "relative/dir"}}, "invalid_source"),
        ({"type": "s3", "config": {"bucket": "b"}, "schedule": {"every": "soon"}}, None),
        ({"type": "s3", "config": {"bucket": "b", "secret_access_key": "***"}}, "invalid_source"),
        ({"type": "s3", "config": {"bucket": "b"}, "metadata": {"source": "x"}}, None),
    ],
)
def test_bad_sources_are_refused(
    client: httpx.Client, body: dict[str, object], code: str | None
) -> None:
    answer = client.put("/v1/indexes/srcbad/sources/bad", json=body)
    assert answer.status_code in (400, 422), answer.text
    assert is_contract_error(answer, status=answer.status_code, code=code)
    assert client.get("/v1/indexes/srcbad/sources/bad").status_code == 404


def test_a_folder_source_brings_changes_keeps_and_prunes(
    client: httpx.Client, folder_root: Path
) -> None:
    folder = folder_root / "handbook"
    (folder / "policies").mkdir(parents=True)
    (folder / "intro.txt").write_text("Welcome to the handbook about llamas.")
    (folder / "policies" / "leave.md").write_text("# Leave\n\nTwenty days of leave a year.")
    (folder / "skip.log").write_text("not this one")
    body = {
        "type": "folder",
        "config": {"path": str(folder), "exclude": ["*.log"]},
        "metadata": {"department": "hr"},
    }
    assert client.put("/v1/indexes/srcfold/sources/hb", json=body).status_code == 201

    first = sync_and_wait(client, "srcfold", "hb")
    assert first["status"] == "completed", first
    assert first["counts"] == {
        "listed": 2, "new": 2, "changed": 0, "unchanged": 0, "deleted": 0, "failed": 0,
    }  # fmt: skip
    documents = _documents(client, "srcfold")
    assert set(documents) == {"intro.txt", "policies/leave.md"}
    metadata = documents["policies/leave.md"]["metadata"]
    assert metadata["department"] == "hr"  # type: ignore[index]
    assert metadata["source"]["name"] == "hb"  # type: ignore[index]

    second = sync_and_wait(client, "srcfold", "hb")
    assert second["counts"]["unchanged"] == 2 and second["counts"]["new"] == 0, second

    time.sleep(0.01)  # a later mtime on file systems with coarse timestamps
    (folder / "intro.txt").write_text("Welcome to the handbook about alpacas, now.")
    (folder / "policies" / "leave.md").unlink()
    third = sync_and_wait(client, "srcfold", "hb")
    assert (third["counts"]["changed"], third["counts"]["deleted"]) == (1, 1), third
    assert set(_documents(client, "srcfold")) == {"intro.txt"}
    hits = client.post("/v1/indexes/srcfold/search", json={"query": "alpacas", "top_k": 1})
    assert "alpacas" in hits.raise_for_status().json()["results"][0]["text"]

    runs = client.get("/v1/indexes/srcfold/sources/hb/runs").raise_for_status().json()["runs"]
    assert [run["run_id"] for run in runs] == [third["run_id"], second["run_id"], first["run_id"]]
    shown = client.get("/v1/indexes/srcfold/sources/hb").raise_for_status().json()
    assert shown["last_run"]["run_id"] == third["run_id"] and shown["state"] == "idle"
    metrics = client.get("/metrics").raise_for_status().text
    assert 'docingest_source_runs_total{index="srcfold",source="hb",status="completed"} 3.0' in (
        metrics
    )
    assert 'docingest_source_items_total{index="srcfold",outcome="deleted",source="hb"} 1.0' in (
        metrics
    )


def test_an_index_deleted_under_its_source_comes_back_whole_at_the_next_run(
    client: httpx.Client, folder_root: Path
) -> None:
    folder = folder_root / "reborn"
    folder.mkdir()
    for name in ("one.txt", "two.txt"):
        (folder / name).write_text(f"The {name} file about herons.")
    body = {"type": "folder", "config": {"path": str(folder)}}
    assert client.put("/v1/indexes/srcreborn/sources/f", json=body).status_code == 201
    assert sync_and_wait(client, "srcreborn", "f")["counts"]["new"] == 2

    assert client.delete("/v1/indexes/srcreborn").status_code == 204
    shown = client.get("/v1/indexes/srcreborn/sources/f")
    assert shown.status_code == 200, "the source outlives its index"
    again = sync_and_wait(client, "srcreborn", "f")
    # With the fingerprints kept, both would count as unchanged and the index stay empty.
    assert (again["counts"]["new"], again["counts"]["unchanged"]) == (2, 0), again
    assert set(_documents(client, "srcreborn")) == {"one.txt", "two.txt"}


def test_an_s3_source_follows_changes_and_deletions(client: httpx.Client, s3: S3Server) -> None:
    s3.client.create_bucket(Bucket="notes-bucket")
    for number in range(12):
        s3.client.put_object(
            Bucket="notes-bucket", Key=f"notes/{number:04}.txt", Body=f"note {number}".encode()
        )
    s3.client.put_object(Bucket="notes-bucket", Key="notes/skip.log", Body=b"excluded")
    s3.client.put_object(Bucket="notes-bucket", Key="other/skip.txt", Body=b"outside the prefix")
    config = s3.config("notes-bucket", prefix="notes/", exclude=["*.log"])
    body = {"type": "s3", "config": config}
    assert client.put("/v1/indexes/srcs3/sources/notes", json=body).status_code == 201
    first = sync_and_wait(client, "srcs3", "notes")
    assert first["status"] == "completed", first
    assert (first["counts"]["listed"], first["counts"]["new"]) == (12, 12), first
    document = client.get("/v1/indexes/srcs3/documents/notes%2F0003.txt").raise_for_status()
    provenance = document.json()["metadata"]["source"]
    assert provenance["uri"] == "s3://notes-bucket/notes/0003.txt" and provenance["etag"]

    s3.client.put_object(Bucket="notes-bucket", Key="notes/0001.txt", Body=b"note one, changed")
    s3.client.delete_object(Bucket="notes-bucket", Key="notes/0002.txt")
    second = sync_and_wait(client, "srcs3", "notes")
    assert second["counts"] == {
        "listed": 11, "new": 0, "changed": 1, "unchanged": 10, "deleted": 1, "failed": 0,
    }, second  # fmt: skip
    assert client.get("/v1/indexes/srcs3").raise_for_status().json()["documents"] == 11

    assert client.delete("/v1/indexes/srcs3/sources/notes?delete_documents=true").status_code == 204
    assert client.get("/v1/indexes/srcs3").raise_for_status().json()["documents"] == 0


def test_a_missing_bucket_fails_the_run_with_a_code(client: httpx.Client, s3: S3Server) -> None:
    body = {"type": "s3", "config": s3.config("no-such-bucket")}
    assert client.put("/v1/indexes/srcs3/sources/missing", json=body).status_code == 201
    run = sync_and_wait(client, "srcs3", "missing")
    assert run["status"] == "failed" and run["error"]["code"] == "bucket_not_found", run


def test_a_second_sync_while_one_is_queued_is_409(
    tmp_path_factory: pytest.TempPathFactory, s3: S3Server
) -> None:
    """Without a scheduler (the API alone), a requested run stays queued: a second request
    is refused with the queued run in the body."""
    prefix = unique_prefix("sources-409")
    with private_redis(prefix):
        settings = service_settings(
            tmp_path_factory.mktemp("sources-409"), prefix, None, sources_allow_private=True
        )
        with api_client(settings) as client:
            body = {"type": "s3", "config": s3.config("busy-bucket")}
            assert client.put("/v1/indexes/srcbusy/sources/b", json=body).status_code == 201
            first = client.post("/v1/indexes/srcbusy/sources/b/sync")
            assert first.status_code == 202 and first.json()["status"] == "queued"
            second = client.post("/v1/indexes/srcbusy/sources/b/sync")
            assert second.status_code == 409, second.text
            assert second.json()["error"]["code"] == "sync_in_progress"
            assert second.json()["run"]["run_id"] == first.json()["run_id"]
            shown = client.get("/v1/indexes/srcbusy/sources/b").json()
            assert shown["state"] == "running" and shown["next_run_at"] is not None
            runs = client.get("/v1/indexes/srcbusy/sources/b/runs").json()["runs"]
            assert [run["status"] for run in runs] == ["queued"]
            # Cancelled while queued: `cancelling` until a scheduler takes it (none here).
            url = f"/v1/indexes/srcbusy/sources/b/runs/{first.json()['run_id']}"
            for _ in range(2):  # asking again answers the same
                cancelled = client.delete(url)
                assert cancelled.status_code == 202, cancelled.text
                assert cancelled.json()["status"] == "cancelling"
            shown = client.get("/v1/indexes/srcbusy/sources/b").json()
            assert shown["state"] == "running" and shown["last_run"]["status"] == "cancelling"


def test_a_web_source_crawls_in_scope_and_answers_304s_the_second_time(
    client: httpx.Client,
) -> None:
    with TestSite() as site:
        site.pages.update(
            {
                "/": page(
                    "Home",
                    "/a.html",
                    "/b.html?from=home",
                    "/loop1.html",
                    "/private/secret.html",
                    "/moved",
                    "/slow.html",
                    "/gone.html",
                    "/manual.txt",
                    "http://example.invalid/off-scope.html",
                ),
                "/a.html": page("Alpacas", body="Alpacas are kept for their wool."),
                "/b.html": page("Bees", head='<link rel="canonical" href="/b.html">'),
                "/loop1.html": page("Loop one", "/loop2.html"),
                "/loop2.html": page("Loop two", "/loop1.html"),
                "/private/secret.html": page("Secret"),
                "/slow.html": page("Slow"),
                "/gone.html": page("Gone soon"),
                "/manual.txt": ("text/plain", b"A plain text manual about llama care."),
                "/sitemapped.html": page("From the sitemap"),
                "/sitemap.xml": (
                    "application/xml",
                    b"<urlset><url><loc>/sitemapped.html</loc></url></urlset>".replace(
                        b"/sitemapped", site.url.encode() + b"/sitemapped"
                    ),
                ),
            }
        )
        site.redirects["/moved"] = "/a.html"
        site.slow["/slow.html"] = 0.3
        body = {
            "type": "web",
            "config": {
                "start_urls": [site.url + "/"],
                "sitemaps": [site.url + "/sitemap.xml"],
                "delay_seconds": 0,
            },
        }
        assert client.put("/v1/indexes/srcweb/sources/site", json=body).status_code == 201
        first = sync_and_wait(client, "srcweb", "site")
        assert first["status"] == "completed", first
        expected = {
            f"{site.url}{path}"
            for path in (
                "/", "/a.html", "/b.html", "/loop1.html", "/loop2.html", "/slow.html",
                "/gone.html", "/manual.txt", "/sitemapped.html",
            )
        }  # fmt: skip
        assert set(_documents(client, "srcweb")) == expected
        assert first["counts"]["new"] == len(expected), first
        assert site.hits["/private/secret.html"] == 0  # robots.txt
        assert site.hits["/loop1.html"] == 1  # the loop is visited once

        site.pages["/a.html"] = page("Alpacas", body="Alpacas now also carry vicunas.")
        del site.pages["/gone.html"]
        second = sync_and_wait(client, "srcweb", "site")
        counts = second["counts"]
        assert (counts["changed"], counts["deleted"], counts["new"]) == (1, 1, 0), second
        assert counts["unchanged"] == len(expected) - 2, second
        assert site.not_modified["/"] >= 1 and site.not_modified["/loop1.html"] == 1
        assert f"{site.url}/gone.html" not in _documents(client, "srcweb")
        hits = client.post("/v1/indexes/srcweb/search", json={"query": "vicunas", "top_k": 1})
        assert "vicunas" in hits.raise_for_status().json()["results"][0]["text"]


def test_a_schedule_runs_the_source_again_and_again(
    client: httpx.Client, folder_root: Path
) -> None:
    folder = folder_root / "scheduled"
    folder.mkdir()
    (folder / "tick.txt").write_text("A note that is read on every tick.")
    body = {"type": "folder", "config": {"path": str(folder)}, "schedule": {"every": "1s"}}
    assert client.put("/v1/indexes/srcsched/sources/tick", json=body).status_code == 201

    def two_scheduled_runs() -> list[dict[str, Any]] | None:
        runs = client.get("/v1/indexes/srcsched/sources/tick/runs").json()["runs"]
        ended = [run for run in runs if run["status"] == "completed"]
        return ended if len(ended) >= 2 else None

    runs = wait_until(two_scheduled_runs, timeout=120, what="two scheduled runs")
    assert {run["trigger"] for run in runs} == {"schedule"}
    assert runs[-1]["counts"]["new"] == 1 and runs[0]["counts"]["unchanged"] == 1
    shown = client.get("/v1/indexes/srcsched/sources/tick").json()
    assert shown["next_run_at"] is not None
    # Without a schedule, no further run comes.
    assert (
        client.put("/v1/indexes/srcsched/sources/tick", json=body | {"schedule": None}).status_code
        == 200
    )
    wait_until(
        lambda: client.get("/v1/indexes/srcsched/sources/tick").json()["next_run_at"] is None,
        timeout=120,
        what="the schedule to be gone once the run under way ends",
    )


def test_robots_crawl_delay_spaces_the_requests(client: httpx.Client) -> None:
    with TestSite() as site:
        site.robots = "User-agent: *\nCrawl-delay: 1\n"
        site.pages.update({"/": page("Home", "/one.html"), "/one.html": page("One")})
        times: list[float] = []
        site.on_request = lambda path: times.append(time.monotonic())
        body = {"type": "web", "config": {"start_urls": [site.url + "/"], "delay_seconds": 0}}
        assert client.put("/v1/indexes/srcdelay/sources/site", json=body).status_code == 201
        run = sync_and_wait(client, "srcdelay", "site")
    assert run["counts"]["new"] == 2, run
    # robots.txt, then the two pages, each at least the crawl delay after the one before.
    assert len(times) == 3 and times[2] - times[1] >= 1.0, times


def test_a_sources_access_list_is_stamped_on_its_documents(
    client: httpx.Client, folder_root: Path
) -> None:
    folder = folder_root / "legal"
    folder.mkdir()
    (folder / "contract.txt").write_text("The indemnity clause of the supplier contract.")
    body = {"type": "folder", "config": {"path": str(folder)}, "access": ["group:legal"]}
    refused = client.put("/v1/indexes/srcacl/sources/legal", json={**body, "access": ["legal"]})
    assert is_contract_error(refused, status=400, code="invalid_access")
    assert client.put("/v1/indexes/srcacl/sources/legal", json=body).status_code == 201
    assert sync_and_wait(client, "srcacl", "legal")["counts"]["new"] == 1
    assert _documents(client, "srcacl")["contract.txt"]["access"] == ["group:legal"]

    def user_key(principals: list[str]) -> dict[str, str]:
        made = client.post("/v1/keys", json={"name": "u", "role": "user", "principals": principals})
        return {"Authorization": f"Bearer {made.raise_for_status().json()['key']}"}

    lawyer, clerk = user_key(["group:legal"]), user_key(["group:hr"])
    url = "/v1/indexes/srcacl/documents/contract.txt"
    assert client.get(url, headers=lawyer).status_code == 200
    assert is_contract_error(client.get(url, headers=clerk), status=404, code="document_not_found")
    # Only an admin may set sources up: a source stamps access lists and fetches anywhere.
    assert is_contract_error(
        client.put("/v1/indexes/srcacl/sources/other", json=body, headers=lawyer),
        status=403,
        code="forbidden",
    )
    run_id = client.get("/v1/indexes/srcacl/sources/legal/runs").json()["runs"][0]["run_id"]
    assert is_contract_error(
        client.delete(f"/v1/indexes/srcacl/sources/legal/runs/{run_id}", headers=lawyer),
        status=403,
        code="forbidden",
    )


def test_a_crawl_cancelled_half_way_stops_and_the_next_run_brings_the_rest(
    client: httpx.Client,
) -> None:
    pages = [f"/p{number}.html" for number in range(30)]
    with TestSite() as site:
        site.pages["/"] = page("Home", *pages)
        for path in pages:
            site.pages[path] = page(f"Page {path}", body=f"Page {path} is about okapis.")
            site.slow[path] = 0.5  # a crawl of 15 s at least: cancelled long before its end
        body = {"type": "web", "config": {"start_urls": [site.url + "/"], "delay_seconds": 0}}
        assert client.put("/v1/indexes/srccancel/sources/site", json=body).status_code == 201
        base = "/v1/indexes/srccancel/sources/site"
        run_id = client.post(f"{base}/sync").raise_for_status().json()["run_id"]

        def brought_two() -> bool:  # the index is made by the run's first job
            listed = client.get("/v1/indexes/srccancel/documents")
            return listed.status_code == 200 and len(listed.json()["documents"]) >= 2

        wait_until(
            brought_two,
            timeout=120,
            what="the crawl to bring its first documents",
        )
        answer = client.delete(f"{base}/runs/{run_id}")
        assert answer.status_code == 202, answer.text
        assert (answer.json()["run_id"], answer.json()["status"]) == (run_id, "cancelling")
        shown = client.get(f"{base}/runs").raise_for_status().json()["runs"][0]
        assert shown["run_id"] == run_id and shown["status"] in ("cancelling", "cancelled")

        ended = wait_for_run(client, "srccancel", "site", run_id)
        assert (ended["status"], ended["error"]) == ("cancelled", None), ended
        assert site.hits[pages[-1]] == 0, "the crawl went on after its cancel"
        # Every job of the run has ended, so no document of it can land after the run ended;
        # the documents are those of its completed jobs.
        jobs = client.get("/v1/jobs", params={"index": "srccancel", "limit": 100}).json()["jobs"]
        statuses = [job["status"] for job in jobs]
        assert set(statuses) <= {"completed", "cancelled"}, statuses
        kept = set(_documents(client, "srccancel"))
        assert len(kept) == statuses.count("completed") == ended["counts"]["new"], ended
        assert ended["counts"]["failed"] == 0, ended

        assert is_contract_error(
            client.delete(f"{base}/runs/{run_id}"), status=409, code="run_state_conflict"
        )
        assert is_contract_error(
            client.delete(f"{base}/runs/run_unknown"), status=404, code="run_not_found"
        )
        assert is_contract_error(
            client.delete(f"/v1/indexes/srccancel/sources/nosuch/runs/{run_id}"),
            status=404,
            code="source_not_found",
        )

        site.slow.clear()
        again = sync_and_wait(client, "srccancel", "site")
        assert again["status"] == "completed", again
        counts = again["counts"]
        assert (counts["unchanged"], counts["new"]) == (len(kept), len(pages) + 1 - len(kept))
        assert len(_documents(client, "srccancel")) == len(pages) + 1
