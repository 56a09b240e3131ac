"""Hostile and malformed requests through one real `docingest serve` (issue #24, items 1, 2,
8 and 9): none may answer 500, every refusal has the contract's error shape and code, and
after each case the worker completes a small good job while the server stays up.

Each case records its outcome, time (request to answer, or upload to the job's end) and the
serve process's resident memory at its peak during the case (sampled every 10 ms); set
DOCINGEST_HOSTILE_REPORT to a path to get them as JSON. RELIABILITY.md, "Hostile requests",
has the figures of one run.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.support.hostile_service import (
    INDEX,
    Deployment,
    MiB,
    PeakRss,
    assert_still_serving,
    deployed,
    run_job,
    search_texts,
)
from tests.support.http_client import Json, assert_error

BIG = 123456789012345678901234567890
"""The issue's integer: beyond int64, it reached Qdrant Edge's binding (OverflowError, a 500)."""


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deployed(tmp_path_factory.mktemp("hostile-requests") / "data") as running:
        assert_still_serving(running)  # creates INDEX with one document
        yield running
        assert_still_serving(running)
        log = running.process.log()
        assert "Traceback" not in log and "internal_error" not in log, log[-3000:]


def measured(
    deployment: Deployment, case: str, send: Callable[[], httpx.Response]
) -> httpx.Response:
    """Send one request; record its status and code, its time and serve's peak memory."""
    with PeakRss(deployment.process.popen.pid) as rss:
        started = time.monotonic()
        response = send()
        seconds = time.monotonic() - started
    code = ""
    if response.headers.get("content-type", "").startswith("application/json"):
        code = " " + str(response.json().get("error", {}).get("code", "")).strip()
    outcome = f"HTTP {response.status_code}{code.rstrip()}; {seconds * 1000:.0f} ms; {_peak(rss)}"
    deployment.record(case, outcome, seconds)
    assert response.status_code != 500, response.text
    return response


def measured_job(deployment: Deployment, case: str, content: bytes, filename: str) -> Json:
    """Upload one file and wait for its job; record its end, time and serve's peak memory."""
    with PeakRss(deployment.process.popen.pid) as rss:
        started = time.monotonic()
        job = run_job(deployment, case, content, filename)
        seconds = time.monotonic() - started
    deployment.outcomes.pop()  # run_job's own record, without the memory
    ended = str(job["status"]) if job["error"] is None else str(job["error"]["code"])
    deployment.record(case, f"{ended}; {seconds:.1f} s; {_peak(rss)}", seconds)
    return job


def _peak(rss: PeakRss) -> str:
    return f"serve RSS {rss.peak / MiB:.0f} MiB, +{rss.growth / MiB:.1f} MiB at peak"


# --- item 1: filters ---------------------------------------------------------------------------


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def body(selector: object) -> str:
    """A search body with `selector` as its filter."""
    return json.dumps({"query": "x", "filter": selector})


def nested_groups(group: str, depth: int) -> dict[str, object]:
    node: dict[str, object] = {"n": 1}
    for _ in range(depth):
        node = {group: node}
    return node


@dataclass(frozen=True)
class BadFilter:
    name: str
    body: str
    """The raw JSON body of the search (some cases are not what json.dumps would write)."""
    status: int
    code: str
    message: str


BAD_FILTERS = [
    BadFilter(
        "filter-int-beyond-int64", json.dumps({"query": "x", "filter": {"n": BIG}}),
        400, "invalid_filter", "outside the 64-bit integer range",
    ),
    BadFilter(
        "filter-int-below-int64", json.dumps({"query": "x", "filter": {"n": -(2**63) - 1}}),
        400, "invalid_filter", "outside the 64-bit integer range",
    ),
    BadFilter(
        "filter-any-of-with-a-huge-int", json.dumps({"query": "x", "filter": {"n": [1, 2**64]}}),
        400, "invalid_filter", "outside the 64-bit integer range",
    ),
    BadFilter(
        "filter-unknown-operator", body({"n": {"$gt": 1}}),
        400, "invalid_filter", "unknown operator '$gt'",
    ),
    BadFilter(
        "filter-value-null", body({"n": None}),
        400, "invalid_filter", "not null",
    ),
    BadFilter(
        "filter-value-NaN", '{"query": "x", "filter": {"n": NaN}}',
        400, "invalid_filter", "finite number",
    ),
    BadFilter(
        "filter-key-with-a-space", body({"bad key": 1}),
        400, "invalid_filter", "is invalid",
    ),
    BadFilter(
        "filter-of-70-keys", body({f"k{i}": i for i in range(70)}),
        400, "invalid_filter", "at most 64 conditions",
    ),
    BadFilter(
        "filter-not-nested-5-deep",
        body(nested_groups("$not", 5)),
        400, "invalid_filter", "4 deep",
    ),
    BadFilter(
        "filter-or-of-65", body({"$or": [{"n": i} for i in range(65)]}),
        400, "invalid_filter", "1 to 64 filter objects",
    ),
    BadFilter(
        "filter-in-of-1001", body({"n": {"in": list(range(1001))}}),
        400, "invalid_filter", "1 to 1000 values",
    ),
    BadFilter(
        "filter-5-in-lists-of-1000",
        body({"$or": [{"n": {"in": list(range(1000))}}] * 5}),
        400, "invalid_filter", "at most 4000 values",
    ),
    BadFilter(
        "filter-in-of-mixed-types", body({"n": {"in": [1, "a"]}}),
        400, "invalid_filter", "of one type",
    ),
    BadFilter(
        "filter-range-bound-1e400", '{"query": "x", "filter": {"n": {"gte": 1' + "0" * 400 + "}}}",
        400, "invalid_filter", "too large",
    ),
    BadFilter(
        "filter-range-of-mixed-bounds", body({"n": {"gte": 1, "lt": "2026-01-01"}}),
        400, "invalid_filter", "all numbers or all RFC 3339",
    ),
    BadFilter(
        "filter-bad-datetime", body({"ingested_at": {"gte": "2026-02-30"}}),
        400, "invalid_filter", "'ingested_at'",
    ),
    BadFilter(
        "filter-datetime-a-number", body({"ingested_at": {"gte": 1767225600}}),
        400, "invalid_filter", "RFC 3339",
    ),
    BadFilter(
        "filter-range-on-document-id", body({"document_id": {"gt": "a"}}),
        400, "invalid_filter", "'document_id'",
    ),
    BadFilter(
        "filter-not-of-nothing", body({"$not": {}}),
        400, "invalid_filter", '"$not" takes one non-empty filter object',
    ),
    BadFilter(
        "filter-or-empty", body({"$or": []}),
        400, "invalid_filter", "$or",
    ),
    BadFilter(
        "filter-unknown-group", body({"$where": "1 == 1"}),
        400, "invalid_filter", "Unknown filter group",
    ),
    BadFilter(
        "filter-empty-operator-object", body({"n": {}}),
        400, "invalid_filter", "operator object is empty",
    ),
    BadFilter(
        "filter-exists-a-string", body({"n": {"exists": "yes"}}),
        400, "invalid_filter", "true or false",
    ),
    BadFilter(
        "filter-a-list", body(["dept", "legal"]),
        422, "validation_error", "filter",
    ),
    BadFilter(
        "filter-datetime-in-year-10000-in-utc",
        body({"ingested_at": {"gte": "9999-12-31T23:59:59-23:59"}}),
        400, "invalid_filter", "within years 0001-9999 once moved to UTC",
    ),
    BadFilter(
        "filter-datetime-in-year-0-in-utc", body({"n": {"lt": "0001-01-01T00:30:00+01:00"}}),
        400, "invalid_filter", "'n'",
    ),
    BadFilter(
        "filter-lone-surrogate", body({"n": {"in": ["a", "\ud800"]}}),
        400, "invalid_filter", "lone surrogate",
    ),
    BadFilter(
        "filter-nested-100000-deep", '{"query": "x", "filter": {"n": ' + nested(100_000) + "}}",
        400, "invalid_request", "error parsing the body",
    ),
]  # fmt: skip


@pytest.mark.parametrize("case", BAD_FILTERS, ids=[case.name for case in BAD_FILTERS])
def test_a_malformed_filter_is_refused_not_a_500(deployment: Deployment, case: BadFilter) -> None:
    headers = {"Content-Type": "application/json"}

    def send() -> httpx.Response:
        return deployment.api.http.post(
            f"/v1/indexes/{INDEX}/search", content=case.body, headers=headers
        )

    message = assert_error(measured(deployment, case.name, send), case.status, case.code)
    assert case.message in message, message
    assert_still_serving(deployment)


def test_int64_bounds_themselves_are_accepted(deployment: Deployment) -> None:
    for value in (2**63 - 1, -(2**63)):
        body = {"query": "x", "filter": {"n": value}}
        response = deployment.api.http.post(f"/v1/indexes/{INDEX}/search", json=body)
        assert response.status_code == 200 and response.json()["results"] == [], response.text


def test_a_declared_field_refuses_values_of_another_type(deployment: Deployment) -> None:
    """Issue 28: a typed index refuses a filter value, an upload's metadata or a schema change
    that breaks its metadata_schema, each naming the field, and no job is made."""
    http = deployment.api.http
    schema = {"year": "integer", "published": "datetime", "tags": "keyword[]"}
    created = http.put("/v1/indexes/typed", json={"metadata_schema": schema})
    assert created.status_code == 201, created.text
    assert http.get("/v1/indexes/typed").json()["metadata_schema"] == schema
    filters: list[tuple[str, dict[str, object]]] = [
        ("typed-filter-string-for-integer", {"year": "2024"}),
        ("typed-filter-range-of-strings-on-integer", {"year": {"gte": "2020"}}),
        ("typed-filter-number-for-datetime", {"published": {"lt": 2024}}),
        ("typed-filter-range-on-keyword-list", {"tags": {"gte": 1}}),
    ]
    for case, value in filters:
        field = next(iter(value))
        response = measured(
            deployment,
            case,
            lambda value=value: http.post(  # type: ignore[misc]
                "/v1/indexes/typed/search", json={"query": "x", "filter": value}
            ),
        )
        assert f"'{field}'" in assert_error(response, 400, "invalid_filter")
    jobs_before = http.get("/v1/jobs", params={"index": "typed"}).json()
    uploads: list[tuple[str, dict[str, object]]] = [
        ("typed-upload-string-for-integer", {"year": "2024"}),
        ("typed-upload-bad-datetime", {"published": "last tuesday"}),
        ("typed-upload-number-in-keyword-list", {"tags": ["a", 1]}),
        ("typed-upload-datetime-in-year-10000-in-utc", {"published": "9999-12-31T23:59:59-23:59"}),
        ("typed-upload-datetime-in-year-0-in-utc", {"published": "0001-01-01T00:30:00+01:00"}),
    ]
    for case, metadata in uploads:
        response = measured(
            deployment,
            case,
            lambda metadata=metadata: http.post(  # type: ignore[misc]
                "/v1/indexes/typed/documents",
                files={"file": ("a.txt", b"some words here", "text/plain")},
                data={"metadata": json.dumps(metadata)},
            ),
        )
        assert f"'{next(iter(metadata))}'" in assert_error(response, 400, "invalid_metadata")
    assert http.get("/v1/jobs", params={"index": "typed"}).json() == jobs_before
    changed = http.put("/v1/indexes/typed", json={"metadata_schema": {"year": "float"}})
    assert "'year'" in assert_error(changed, 409, "index_conflict")
    for bad in ({"year": "int"}, {"bad key": "keyword"}, {"filename": "keyword"}):
        refused = http.put("/v1/indexes/typed", json={"metadata_schema": bad})
        assert_error(refused, 422, "validation_error")
    added = http.put("/v1/indexes/typed", json={"metadata_schema": {"team": "keyword"}})
    assert added.status_code == 200, added.text
    assert added.json()["metadata_schema"] == {**schema, "team": "keyword"}
    assert_still_serving(deployment)


# --- item 2 and 8: index settings that can never work -------------------------------------------


@pytest.mark.parametrize(
    ("case", "body", "fragment"),
    [
        (
            "put-unknown-local-model",
            {"embedding": {"provider": "local", "model": "nonexistent-model"}},
            "all-MiniLM-L6-v2",
        ),
        ("put-local-5-dimensions", {"embedding": {"provider": "local", "dimensions": 5}}, "384"),
        ("put-unknown-provider", {"embedding": {"provider": "cohere"}}, "local, openai"),
        (
            "put-chunk-size-100000000",
            {"chunking": {"chunk_size": 100_000_000}},
            "chunking.chunk_size",
        ),
    ],
)
def test_an_index_that_could_never_work_is_refused_at_put(
    deployment: Deployment, case: str, body: dict[str, object], fragment: str
) -> None:
    name = case.removeprefix("put-")
    response = measured(
        deployment, case, lambda: deployment.api.http.put(f"/v1/indexes/{name}", json=body)
    )
    message = assert_error(response, 422, "validation_error")
    assert fragment in message, message
    assert deployment.api.http.get(f"/v1/indexes/{name}").status_code == 404
    assert_still_serving(deployment)


# --- item 8: search parameters -----------------------------------------------------------------


@pytest.mark.parametrize("threshold", ["NaN", "Infinity", "-Infinity"])
def test_a_score_threshold_that_is_no_number_is_refused(
    deployment: Deployment, threshold: str
) -> None:
    body = '{"query": "x", "score_threshold": ' + threshold + "}"
    headers = {"Content-Type": "application/json"}

    def send() -> httpx.Response:
        return deployment.api.http.post(
            f"/v1/indexes/{INDEX}/search", content=body, headers=headers
        )

    response = measured(deployment, f"score-threshold-{threshold}", send)
    assert "score_threshold" in assert_error(response, 422, "validation_error")


def raw_get(deployment: Deployment, target: bytes) -> httpx.Response:
    """GET `target` over a plain socket (httpx refuses a query string this long itself)."""
    request = b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", deployment.env.port), timeout=30) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    return httpx.Response(int(status_line.split()[1]), headers=headers, content=body)


@pytest.mark.parametrize(
    ("size", "status", "code"),
    [(20_000, 422, "validation_error"), (100_000, 400, "invalid_request")],
)
def test_a_long_query_string_gets_the_json_error_shape(
    deployment: Deployment, size: int, status: int, code: str
) -> None:
    """100 KB got uvicorn's plain-text 400 ("Invalid HTTP request received.")."""
    target = f"/v1/indexes/{INDEX}/search?q=".encode() + b"x" * size
    response = measured(
        deployment, f"get-search-q-{size // 1000}-kb", lambda: raw_get(deployment, target)
    )
    message = assert_error(response, status, code)
    assert "x" * 100 not in message  # the query is not echoed back
    assert_still_serving(deployment)


def test_metadata_errors_say_what_is_wrong_once(deployment: Deployment) -> None:
    def send(metadata: str) -> Callable[[], httpx.Response]:
        return lambda: deployment.api.upload(INDEX, b"a note", filename="n.txt", metadata=metadata)

    control = measured(deployment, "metadata-control-character", send('{"a\x01": 1}'))
    message = assert_error(control, 400, "invalid_metadata")
    assert "Invalid control character at position 3." in message and "at at" not in message
    huge = measured(deployment, "metadata-int-beyond-int64", send(json.dumps({"n": BIG})))
    assert "64-bit integer range" in assert_error(huge, 400, "invalid_metadata")
    lone = measured(deployment, "metadata-lone-surrogate", send('{"team": "\\ud800"}'))
    assert "'team' holds a lone surrogate" in assert_error(lone, 400, "invalid_metadata")
    deep = measured(deployment, "metadata-nested-10000-deep", send(nested(10_000)))
    assert "nested too deeply" in assert_error(deep, 400, "invalid_metadata")
    assert_still_serving(deployment)


# --- item 9: formats that are not what their name says ----------------------------------------

SVG = (
    b'<?xml version="1.0" standalone="no"?>\n'
    b'<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
    b'"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n'
    b'<svg width="200" height="100" xmlns="http://www.w3.org/2000/svg">'
    b'<rect width="200" height="100"/><text x="10" y="50">Quarterly revenue</text></svg>\n'
)
DTD_PAGE = (
    b'<?xml version="1.0" encoding="utf-8"?>\n'
    b'<!DOCTYPE html [\n  <!ENTITY product "Harbour Tide Tables">\n  <!ELEMENT p ANY>\n]>\n'
    b"<html><head><title>Tides</title></head>"
    b"<body><p>The ferry leaves the breakwater at dawn on Sunday.</p></body></html>\n"
)


def test_a_text_file_named_pdf_says_so(deployment: Deployment) -> None:
    text = b"Minutes of the harbour board: the breakwater repairs start in May.\n" * 3
    job = measured_job(deployment, "text-named-pdf", text, "minutes.pdf")
    assert job["status"] == "completed", job
    assert job["result"]["format"] == "txt"
    assert "named .pdf but holds plain text" in job["result"]["format_note"]
    assert_still_serving(deployment)


def test_svg_is_refused_not_indexed_as_raw_xml(deployment: Deployment) -> None:
    job = measured_job(deployment, "svg-with-doctype", SVG, "chart.svg")
    assert job["status"] == "failed" and job["error"]["code"] == "unsupported_format", job
    assert "SVG image" in job["error"]["message"]
    assert_still_serving(deployment)


def test_html_with_an_xml_prolog_and_internal_dtd_has_no_stray_chunk(
    deployment: Deployment,
) -> None:
    job = measured_job(deployment, "html-xml-prolog-internal-dtd", DTD_PAGE, "tides.html")
    assert job["status"] == "completed" and job["result"]["chunks"] == 1, job
    texts = search_texts(deployment, "ferry breakwater", "html-xml-prolog-internal-dtd")
    assert texts == ["The ferry leaves the breakwater at dawn on Sunday."], texts
    assert not any(re.fullmatch(r"\s*\]>\s*", text) for text in texts)
    assert_still_serving(deployment)
