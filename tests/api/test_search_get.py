"""`GET …/search` takes the POST's filter as JSON text in `filter` and honours it; a filter it
cannot read is 400 `invalid_filter`, never ignored (docs/reference/http-api.md, "Search")."""

from __future__ import annotations

import json

import pytest

from tests.api.test_documents import Api, api  # noqa: F401 (the fixture, both engines)
from tests.pipeline.test_documents import INDEX, ingest
from tests.support.api_app import is_contract_error

SEARCH = f"/v1/indexes/{INDEX}/search"


def test_the_filter_of_a_get_search_is_honoured(api: Api) -> None:  # noqa: F811
    for n in range(4):
        ingest(api.services, f"report-{n}.pdf", 2, team="ab"[n % 2])
    params: dict[str, str | int] = {"q": "harbour report", "top_k": 20, "mode": "keyword"}
    everything = api.http.get(SEARCH, params=params).json()["results"]
    assert {r["metadata"]["team"] for r in everything} == {"a", "b"}
    only_a = api.http.get(SEARCH, params=params | {"filter": json.dumps({"team": "a"})})
    assert only_a.status_code == 200, only_a.text
    found = only_a.json()["results"]
    assert len(found) == 4 and {r["metadata"]["team"] for r in found} == {"a"}
    posted = api.http.post(SEARCH, json={"query": "harbour report", "top_k": 20,
                                         "mode": "keyword", "filter": {"team": "a"}})  # fmt: skip
    same = [(r["document_id"], r["chunk_index"]) for r in posted.json()["results"]]
    assert [(r["document_id"], r["chunk_index"]) for r in found] == same


@pytest.mark.parametrize(
    "raw",
    ["{team: a}", "[]", "null", '"a"', "1", "{" * 20_000, '{"team": {"$nope": 1}}'],
    ids=["not-json", "list", "null", "string", "number", "too-long", "bad-operator"],
)
def test_a_get_filter_it_cannot_read_is_refused(api: Api, raw: str) -> None:  # noqa: F811
    response = api.http.get(SEARCH, params={"q": "harbour", "filter": raw})
    assert is_contract_error(response, status=400, code="invalid_filter")
