"""Hostile requests to the documents endpoints (v1.2) through real uvicorn: limits far out of
bounds, forged and garbage cursors, filters that are not filters, a delete that would match
everything, PATCHes with bad metadata, during a re-ingest, and many at once. Each gets a
clear contract error or a consistent result, never a 500."""

from __future__ import annotations

import base64
import json
import threading

import httpx
import pytest

from tests.api.test_documents import DOCS, Api, api, listing  # noqa: F401 (the fixture)
from tests.pipeline.test_documents import INDEX, chunk_metadata, ingest
from tests.support.api_app import is_contract_error
from tests.support.jobs import job_spec


@pytest.mark.parametrize("limit", ["0", "-1", "1001", str(10**12), "1e3", "many", ""])
def test_a_limit_out_of_bounds_is_refused(api: Api, limit: str) -> None:  # noqa: F811
    response = api.http.get(DOCS, params={"limit": limit})
    assert is_contract_error(response, status=422)


CURSORS = [
    "x", "c1.", "c1.====", "c1.%%%", "c2.", "c2..", "c2.%%%.AAAA",
    "c1." + base64.urlsafe_b64encode(b"doc").decode(),  # the unchecked format of old
    "c2." + base64.urlsafe_b64encode(b"doc").decode(),  # no check
    "c2." + base64.urlsafe_b64encode(b"\xff\xfe").decode().rstrip("=") + ".AAAA",  # not UTF-8
    "c2." + base64.urlsafe_b64encode(b"doc\x00\x07").decode().rstrip("=") + ".AAAA",  # controls
    "c2." + "QUFB" * 900 + ".AAAA",  # longer than any id
]  # fmt: skip


@pytest.mark.parametrize("cursor", CURSORS)
def test_a_forged_or_garbage_cursor_is_400(api: Api, cursor: str) -> None:  # noqa: F811
    ingest(api.services, "doc", 1)
    response = api.http.get(DOCS, params={"limit": 5, "cursor": cursor})
    if len(cursor) > 4096:
        assert is_contract_error(response, status=422)
    else:
        assert is_contract_error(response, status=400, code="invalid_cursor")


def test_a_cursor_past_a_deleted_document_lists_what_follows(api: Api) -> None:  # noqa: F811
    for name in ("a", "b", "c", "e"):
        ingest(api.services, name, 1)
    cursor = listing(api.http, limit=2)["next_cursor"]  # after "b"
    assert api.http.delete(f"{DOCS}/b").status_code == 204
    body = listing(api.http, limit=5, cursor=cursor)
    assert [d["document_id"] for d in body["documents"]] == ["c", "e"]


def test_a_hand_made_cursor_is_400(api: Api) -> None:  # noqa: F811
    for name in ("a", "c", "e"):
        ingest(api.services, name, 1)
    real = listing(api.http, limit=1)["next_cursor"]  # after "a"
    check = real.rsplit(".", 1)[1]
    for position in (b"b", b"c"):  # a position this listing never handed out, or another's
        forged = "c2." + base64.urlsafe_b64encode(position).decode().rstrip("=") + "." + check
        response = api.http.get(DOCS, params={"limit": 5, "cursor": forged})
        assert is_contract_error(response, status=400, code="invalid_cursor")


FILTERS = [
    "not json", "[1, 2]", '"legal"', "null", "[" * 10_000 + "]" * 10_000,
    json.dumps({f"k{n}": n for n in range(100)}), '{"bad key": 1}', '{"n": {"$where": 1}}',
    '{"n": ' + "9" * 40 + "}", '{"n": NaN}', "x" * 20_000,
]  # fmt: skip


@pytest.mark.parametrize("raw", FILTERS)
def test_a_filter_that_is_not_a_filter_is_400(api: Api, raw: str) -> None:  # noqa: F811
    for response in (
        api.http.get(DOCS, params={"filter": raw, "limit": 5}),
        api.http.delete(DOCS, params={"filter": raw}),
    ):
        assert is_contract_error(response, status=400, code="invalid_filter")


def test_a_delete_must_name_what_it_deletes(api: Api) -> None:  # noqa: F811
    for n in range(3):
        ingest(api.services, f"doc-{n}", 1)
    for params in ({}, {"filter": "{}"}, {"all": "false"}, {"filter": "{}", "all": "false"}):
        assert is_contract_error(api.http.delete(DOCS, params=params), status=400)
    assert len(listing(api.http)["documents"]) == 3


@pytest.mark.parametrize(
    "selector",
    [
        {"document_id": {"exists": True}},
        {"$not": {"nobody-has": "this"}},
        {"grp": {"ne": "none of them"}},
        {"grp": {"nin": ["x", "y"]}},
        {"$or": [{"grp": "g"}, {"grp": {"exists": False}}]},
    ],
)
def test_a_filter_that_matches_everything_needs_all_true(
    api: Api,  # noqa: F811
    selector: dict[str, object],
) -> None:
    """Issue 40: the guard is decided by what the filter matches, not by its spelling."""
    for n in range(3):
        ingest(api.services, f"doc-{n}", 1, grp="g")
    response = api.http.delete(DOCS, params={"filter": json.dumps(selector)})
    assert is_contract_error(response, status=400, code="invalid_filter")
    assert "all=true" in response.json()["error"]["message"]
    assert len(listing(api.http)["documents"]) == 3
    ingest(api.services, "other", 1, grp="h")
    some = json.dumps(selector | {"$and": [{"grp": "g"}]})  # leaves "other" out
    deleted = api.http.delete(DOCS, params={"filter": some})
    assert deleted.status_code == 202 and deleted.json() == {"deleted": 3, "more": False}
    assert [d["document_id"] for d in listing(api.http)["documents"]] == ["other"]


METADATA = [
    None, "team", [1], {"text": "x"}, {"": 1}, {"k" * 65: 1}, {"nested": {"a": 1}},
    {"huge": "x" * 1_000_000}, {"n": 2**64}, {"list": list(range(1000))},
]  # fmt: skip


@pytest.mark.parametrize("metadata", METADATA)
def test_patch_with_invalid_metadata_is_400_and_changes_nothing(
    api: Api,  # noqa: F811
    metadata: object,
) -> None:
    ingest(api.services, "doc", 3, team="a")
    response = api.http.patch(f"{DOCS}/doc", json={"metadata": metadata})
    assert is_contract_error(response, status=400, code="invalid_metadata")
    assert api.http.get(f"{DOCS}/doc").json()["metadata"] == {"team": "a"}


def test_patch_bodies_that_are_not_patches_are_refused(api: Api) -> None:  # noqa: F811
    ingest(api.services, "doc", 1, team="a")
    for body in (b"", b"not json", b"[]", b'{"meta": {}}', b"{" * 5000):
        response = api.http.patch(
            f"{DOCS}/doc", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code in (400, 422), (body[:20], response.text)
        assert is_contract_error(response, status=response.status_code)
    assert api.http.get(f"{DOCS}/doc").json()["metadata"] == {"team": "a"}


def test_patch_during_a_reingest_is_409(api: Api) -> None:  # noqa: F811
    ingest(api.services, "doc", 2, team="a")
    jobs = api.services.jobs
    job = jobs.create(job_spec(INDEX, document_id="doc"))
    claim = jobs.claim(job.job_id, max_attempts=3, stale_after=60)
    response = api.http.patch(f"{DOCS}/doc", json={"metadata": {"team": "b"}})
    assert is_contract_error(response, status=409, code="document_ingesting")
    jobs.fail(job.job_id, claim.attempt, {"code": "x", "message": "failed"})
    assert api.http.patch(f"{DOCS}/doc", json={"metadata": {"team": "b"}}).status_code == 200


def test_concurrent_patches_all_answer_and_one_wins_on_every_chunk(api: Api) -> None:  # noqa: F811
    ingest(api.services, "doc", 20, team="a")
    answers: list[httpx.Response] = []

    def patch(team: str) -> None:
        answers.append(api.http.patch(f"{DOCS}/doc", json={"metadata": {"team": team}}))

    threads = [threading.Thread(target=patch, args=(f"t{n}",)) for n in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert [a.status_code for a in answers] == [200] * 5, [a.text for a in answers]
    last = max((a.json() for a in answers), key=lambda d: d["version"])
    assert sorted(a.json()["version"] for a in answers) == [2, 3, 4, 5, 6]
    stored = chunk_metadata(api.services, "doc")
    assert len(stored) == 20 and all(p["metadata"] == last["metadata"] for p in stored)
