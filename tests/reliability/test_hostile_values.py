"""Odd values in filters and metadata through real uvicorn on both engines (issue 40): a
datetime that leaves years 1-9999 once moved to UTC, a lone surrogate, and (a property test)
arbitrary JSON where a filter or metadata goes. Each is answered 2xx or 4xx, never 5xx; the
named cases get 400 with the code of the field they were sent in, and change nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docingest.pipeline.services import Services
from docingest.workers.app import create_celery_app
from tests.pipeline.test_documents import INDEX, ingest
from tests.support.api_app import api_client, is_contract_error
from tests.support.embedding_server import FakeEmbeddingServer
from tests.support.engines import ENGINES, engine_fields
from tests.support.redis_db import private_redis, unique_prefix
from tests.support.settings import FAKE_DIMENSIONS, service_settings

DOCS = f"/v1/indexes/{INDEX}/documents"
SEARCH = f"/v1/indexes/{INDEX}/search"
SCHEMA = {"published": "datetime", "year": "integer", "tags": "keyword[]"}
KEPT = "kept.txt"
"""A document every case may PATCH; put back when a delete by filter took it."""
JSON = {"content-type": "application/json"}

OUT_OF_RANGE = ["9999-12-31T23:59:59-23:59", "0001-01-01T00:30:00+01:00"]
"""Valid RFC 3339, but in year 10000 and year 0 once moved to UTC (the issue's two)."""
SURROGATE = "\ud800"
"""A lone surrogate: what JSON's "\\ud800" decodes to, and no Unicode character."""


@dataclass
class Served:
    http: httpx.Client
    services: Services


@pytest.fixture(scope="module", params=ENGINES)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """The app under uvicorn sharing its `Services` with the test (no worker runs), the index
    declaring a datetime, an integer and a keyword list, with three documents."""
    prefix = unique_prefix("values")
    with FakeEmbeddingServer(dimensions=FAKE_DIMENSIONS) as fake, private_redis(prefix):
        data_dir = tmp_path_factory.mktemp("values")
        engine = engine_fields(request.param, data_dir)
        settings = service_settings(data_dir, prefix, fake, **engine)
        services = Services(settings, owns_store=True)
        services.ensure_index(INDEX)
        try:
            celery = create_celery_app(settings)
            with api_client(settings, services=services, celery=celery) as http:
                put = http.put(f"/v1/indexes/{INDEX}", json={"metadata_schema": SCHEMA})
                assert put.status_code == 200, put.text
                for n, document_id in enumerate((KEPT, "other-1.txt", "other-2.txt")):
                    ingest(services, document_id, 2, team="ab"[n % 2], year=2020 + n)
                yield Served(http, services)
        finally:
            services.close()


def raw_json(value: object) -> str:
    """`value` as JSON text, a lone surrogate escaped as "\\ud800" (as a client sends it)."""
    return json.dumps(value)


def search(served: Served, selector: object) -> httpx.Response:
    body = '{"query": "harbour", "filter": ' + raw_json(selector) + "}"
    return served.http.post(SEARCH, content=body, headers=JSON)


def listing(served: Served, selector: object) -> httpx.Response:
    return served.http.get(DOCS, params={"filter": raw_json(selector), "limit": 5})


def delete_by(served: Served, selector: object) -> httpx.Response:
    return served.http.delete(DOCS, params={"filter": raw_json(selector), "limit": 1})


def upload(served: Served, metadata: object) -> httpx.Response:
    return served.http.post(
        DOCS,
        files={"file": ("note.txt", b"a harbour note", "text/plain")},
        data={"metadata": raw_json(metadata)},
    )


def patch(served: Served, metadata: object) -> httpx.Response:
    body = '{"metadata": ' + raw_json(metadata) + "}"
    return served.http.patch(f"{DOCS}/{KEPT}", content=body, headers=JSON)


def document_ids(served: Served) -> list[str]:
    return [d["document_id"] for d in served.http.get(DOCS).json()["documents"]]


def kept_metadata(served: Served) -> dict[str, Any]:
    metadata: dict[str, Any] = served.http.get(f"{DOCS}/{KEPT}").json()["metadata"]
    return metadata


def refused(response: httpx.Response, code: str, field: str) -> None:
    assert is_contract_error(response, status=400, code=code)
    assert f"'{field}'" in response.json()["error"]["message"], response.text


# --- the values ------------------------------------------------------------------


@pytest.mark.parametrize("moment", OUT_OF_RANGE)
@pytest.mark.parametrize("field", ["published", "ingested_at", "undeclared"])
def test_a_datetime_out_of_range_in_utc_is_an_invalid_filter(
    served: Served, moment: str, field: str
) -> None:
    before = document_ids(served)
    selector = {field: {"gte": moment}}
    for response in (search(served, selector), listing(served, selector)):
        refused(response, "invalid_filter", field)
    refused(delete_by(served, selector), "invalid_filter", field)
    assert document_ids(served) == before
    if field == "published":  # a declared datetime also takes an equality
        refused(search(served, {field: moment}), "invalid_filter", field)


@pytest.mark.parametrize("moment", OUT_OF_RANGE)
def test_a_datetime_out_of_range_in_utc_is_invalid_metadata(served: Served, moment: str) -> None:
    jobs_before = served.http.get("/v1/jobs", params={"index": INDEX}).json()
    metadata_before = kept_metadata(served)
    refused(upload(served, {"published": moment}), "invalid_metadata", "published")
    refused(patch(served, {"published": moment}), "invalid_metadata", "published")
    assert served.http.get("/v1/jobs", params={"index": INDEX}).json() == jobs_before
    assert kept_metadata(served) == metadata_before


@pytest.mark.parametrize(
    "selector",
    [
        {"team": SURROGATE},
        {"document_id": f"a{SURROGATE}b"},
        {"team": {"in": ["a", SURROGATE]}},
        {"team": {"ne": SURROGATE}},
        {"$not": {"tags": SURROGATE}},
        {"published": {"gte": SURROGATE}},
    ],
)
def test_a_lone_surrogate_in_a_filter_is_an_invalid_filter(
    served: Served, selector: dict[str, Any]
) -> None:
    before = document_ids(served)
    for response in (
        search(served, selector),
        listing(served, selector),
        delete_by(served, selector),
    ):
        assert is_contract_error(response, status=400, code="invalid_filter")
    assert document_ids(served) == before


@pytest.mark.parametrize(
    "metadata",
    [{"team": SURROGATE}, {"team": f"legal{SURROGATE}"}, {"tags": ["a", SURROGATE]}],
)
def test_a_lone_surrogate_in_metadata_is_invalid_metadata(
    served: Served, metadata: dict[str, Any]
) -> None:
    field = next(iter(metadata))
    metadata_before = kept_metadata(served)
    refused(upload(served, metadata), "invalid_metadata", field)
    refused(patch(served, metadata), "invalid_metadata", field)
    assert kept_metadata(served) == metadata_before


def test_metadata_nested_thousands_deep_is_invalid_metadata(served: Served) -> None:
    """A form field of 10,000 brackets made json.loads raise RecursionError, a 500."""
    response = served.http.post(
        DOCS,
        files={"file": ("note.txt", b"a harbour note", "text/plain")},
        data={"metadata": "[" * 10_000 + "]" * 10_000},
    )
    assert is_contract_error(response, status=400, code="invalid_metadata")


# --- any JSON: 2xx or 4xx, never 5xx -------------------------------------------------------


def _datetimes() -> st.SearchStrategy[str]:
    """RFC 3339 date-times with any offset (some leave years 1-9999 in UTC), and dates."""
    offset = st.one_of(
        st.just("Z"),
        st.builds(
            lambda sign, hours, minutes: f"{sign}{hours:02d}:{minutes:02d}",
            st.sampled_from("+-"), st.integers(0, 23), st.integers(0, 59),
        ),
    )  # fmt: skip
    moment = st.datetimes().map(lambda value: value.isoformat(timespec="seconds"))
    return st.one_of(
        st.builds(lambda at, tz: at + tz, moment, offset),
        st.dates().map(lambda value: value.isoformat()),
        st.sampled_from(OUT_OF_RANGE + ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z"]),
    )


ODD_STRINGS = st.sampled_from(
    [SURROGATE, f"a{SURROGATE}", "\udfff", "NaN", "Infinity", "-0", "1e400", "null", "",
     "\x00", "a\n", "x" * 2_500, "ü" * 1_000, "$not", "2026-02-30"]
)  # fmt: skip
NUMBERS = st.one_of(
    st.integers(),
    st.sampled_from([2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**40]),
    st.floats(),  # NaN and infinities too: Python's json writes and reads them
    st.sampled_from([5e-324, 1.7976931348623157e308, -0.0]),
)
SCALARS = st.one_of(
    st.none(), st.booleans(), NUMBERS, st.text(max_size=30), _datetimes(), ODD_STRINGS
)
KEYS = st.one_of(
    st.sampled_from(
        ["published", "year", "tags", "team", "document_id", "ingested_at", "$not", "$or",
         "$and", "$where", "a.b", "a\n", "", "k" * 65, "in", "gte", "ne", "exists", "all"]
    ),
    st.text(max_size=12),
)  # fmt: skip


def _nested(leaf: Any, depth: int) -> Any:
    for level in range(depth):
        leaf = [leaf] if level % 2 else {"$not": leaf}
    return leaf


VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=12,
)
DEEP = st.builds(_nested, SCALARS, st.sampled_from([6, 60, 600]))
HOSTILE = st.dictionaries(KEYS, st.one_of(VALUES, DEEP), min_size=1, max_size=5)
"""Objects that are mostly wrong somewhere: each is refused, or its odd part is accepted."""

# Objects that are mostly right, so that odd values also reach the store and the engines.
PLAIN = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),  # any code point but a surrogate: NUL, controls, RTL marks
    _datetimes(),
)
FIELDS = st.sampled_from(["published", "year", "tags", "team", "document_id", "ingested_at", "n"])
OPERATORS = st.dictionaries(
    st.sampled_from(["gte", "gt", "lte", "lt", "in", "nin", "ne", "all", "exists"]),
    st.one_of(PLAIN, st.lists(PLAIN, min_size=1, max_size=3)),
    min_size=1,
    max_size=2,
)
CONDITIONS = st.dictionaries(
    FIELDS, st.one_of(PLAIN, st.lists(PLAIN, min_size=1, max_size=3), OPERATORS),
    min_size=1, max_size=3,
)  # fmt: skip
FILTERS = st.recursive(
    CONDITIONS,
    lambda inner: st.one_of(
        st.builds(lambda member: {"$not": member}, inner),
        st.builds(lambda members: {"$or": members}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda members: {"$and": members}, st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=4,
)
METADATA = st.dictionaries(
    st.one_of(FIELDS, st.from_regex(r"[A-Za-z][A-Za-z0-9_.-]{0,20}", fullmatch=True)),
    st.one_of(PLAIN, st.lists(st.text(max_size=40), max_size=5)),
    max_size=5,
)


def _acceptable(response: httpx.Response) -> None:
    assert 200 <= response.status_code < 500, (response.request.url, response.text[:500])
    if response.status_code >= 400:
        assert is_contract_error(response, status=response.status_code)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(selector=st.one_of(FILTERS, HOSTILE), metadata=st.one_of(METADATA, HOSTILE))
def test_any_json_as_a_filter_or_metadata_is_never_a_server_error(
    served: Served, selector: dict[str, Any], metadata: dict[str, Any]
) -> None:
    for response in (
        search(served, selector),
        listing(served, selector),
        delete_by(served, selector),
        upload(served, metadata),
        patch(served, metadata),
    ):
        _acceptable(response)
    if served.services.store.live_document(INDEX, KEPT) is None:  # a delete matched it
        ingest(served.services, KEPT, 2, team="a")


def test_a_typed_filter_reads_alike_in_search_listing_and_delete(served: Served) -> None:
    """The listing and delete by filter read a filter against the index's schema, as a search
    does: a string for a declared integer is refused everywhere, never silently matched as a
    keyword (which found nothing in the listing and deleted nothing)."""
    for response in (
        search(served, {"year": "2021"}),
        listing(served, {"year": "2021"}),
        delete_by(served, {"year": "2021"}),
    ):
        assert is_contract_error(response, status=400, code="invalid_filter")
    found = listing(served, {"year": {"gte": 2021}}).raise_for_status().json()["documents"]
    hits = search(served, {"year": {"gte": 2021}}).raise_for_status().json()["results"]
    listed = {document["document_id"] for document in found}
    assert listed == {hit["document_id"] for hit in hits} == {"other-1.txt", "other-2.txt"}
