"""The SDK's models against the running service's `/openapi.json` and the contract: every
documented endpoint has an SDK operation; where the server serves it, the SDK models every
field the server documents and requires none the server may leave out; a field the server
does not serve is one the contract names."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from docingest import _admin_operations as admin_ops
from docingest import _operations as ops
from docingest._core import Call
from docingest.models import (
    ApiKey,
    ChunkPage,
    CreatedKey,
    DeleteResult,
    Delivery,
    DeliveryList,
    Document,
    DocumentPage,
    IndexDetail,
    IndexInfo,
    IndexList,
    IndexSettings,
    Job,
    JobList,
    KeyList,
    KeyRequest,
    MetadataUpdate,
    RunCounts,
    SearchRequest,
    SearchResponse,
    SearchResult,
    SourceInfo,
    SourceList,
    SourceRun,
    SourceRunList,
    SourceSettings,
    UploadAccepted,
    Webhook,
    WebhookList,
    WebhookSubscription,
)
from tests.support.api_app import API_DOC, documented_endpoints
from tests.support.docingest_service import ServiceEnv

Json = dict[str, Any]
NAMES = {
    "IDX": "{index}",
    "DOC": "{document_id}",
    "JOB": "{job_id}",
    "HOOK": "{name}",
    "KEY": "{id}",
    "RUN": "{run_id}",
}

OPERATIONS: list[tuple[Call[Any], type[BaseModel] | None, type[BaseModel] | None]] = [
    (ops.create_index("IDX"), IndexSettings, IndexInfo),
    (ops.list_indexes(), None, IndexList),
    (ops.get_index("IDX"), None, IndexDetail),
    (ops.delete_index("IDX"), None, None),
    (ops.upload("IDX", b"x"), None, UploadAccepted),
    (ops.get_job("JOB"), None, Job),
    (ops.list_jobs(), None, JobList),
    (ops.cancel_job("JOB"), None, Job),
    (ops.retry_job("JOB"), None, Job),
    (ops.list_documents("IDX"), None, DocumentPage),
    (ops.get_document("IDX", "DOC"), None, Document),
    (ops.update_metadata("IDX", "DOC", {}), MetadataUpdate, Document),
    (ops.delete_document("IDX", "DOC"), None, None),
    (ops.delete_documents("IDX", {}), None, DeleteResult),
    (ops.list_chunks("IDX", "DOC"), None, ChunkPage),
    (ops.search("IDX", "q"), SearchRequest, SearchResponse),
    (
        admin_ops.put_webhook("IDX", "HOOK", "https://example.org/hook"),
        WebhookSubscription,
        Webhook,
    ),
    (admin_ops.list_webhooks("IDX"), None, WebhookList),
    (admin_ops.get_webhook("IDX", "HOOK"), None, Webhook),
    (admin_ops.delete_webhook("IDX", "HOOK"), None, None),
    (admin_ops.list_deliveries("IDX", "HOOK"), None, DeliveryList),
    (admin_ops.put_source("IDX", "HOOK", "folder", {"path": "/srv"}), SourceSettings, SourceInfo),
    (admin_ops.list_sources("IDX"), None, SourceList),
    (admin_ops.get_source("IDX", "HOOK"), None, SourceInfo),
    (admin_ops.delete_source("IDX", "HOOK"), None, None),
    (admin_ops.sync_source("IDX", "HOOK"), None, SourceRun),
    (admin_ops.list_source_runs("IDX", "HOOK"), None, SourceRunList),
    (admin_ops.cancel_source_run("IDX", "HOOK", "RUN"), None, SourceRun),
    (ops.health(), None, None),
    (ops.ready(), None, None),
    (ops.metrics(), None, None),
    (ops.update_access("IDX", "DOC", ["group:a"]), MetadataUpdate, Document),
    (admin_ops.create_key("k", role="user"), KeyRequest, CreatedKey),
    (admin_ops.list_keys(), None, KeyList),
    (admin_ops.revoke_key("KEY"), None, None),
]
"""Each SDK operation (built with placeholder names) with its request body and answer model."""
NESTED: dict[str, type[BaseModel]] = {
    "Result": SearchResult,
    "StoredDocument": Document,
    "Delivery": Delivery,
    "Source": SourceInfo,
    "Run": SourceRun,
    "RunCounts": RunCounts,
    "ApiKeyInfo": ApiKey,
}
"""Components the server names differently, checked against the SDK model as well."""


SAME_AS = {("get", "/v1/indexes/{index}/search"): "the browser's form of POST .../search"}
"""Documented endpoints the SDK reaches through another one."""


def endpoint(call: Call[Any]) -> tuple[str, str]:
    path = call.path
    for placeholder, template in NAMES.items():
        path = path.replace(placeholder, template)
    return call.method.lower(), path


@pytest.fixture(scope="module")
def openapi(sdk_serve: ServiceEnv) -> Json:
    """The schema a real `docingest serve` publishes."""
    return dict(
        httpx.get(f"{sdk_serve.base_url}/openapi.json", timeout=60).raise_for_status().json()
    )


def resolve(schema: Json, spec: Json) -> Json:
    """Follow `$ref` (and a one-member `allOf`/`anyOf` without null) to an object schema."""
    while True:
        if "$ref" in schema:
            schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
            continue
        union = schema.get("anyOf") or schema.get("allOf") or []
        options = [s for s in union if s.get("type") != "null"]
        if len(options) == 1 and "properties" not in schema:
            schema = options[0]
            continue
        return schema


def contract_names(field: str) -> bool:
    """Whether the contract (docs/reference/http-api.md) names `field` (as `field` or "field")."""
    text = API_DOC.read_text()
    return bool(re.search(rf'[`"]{re.escape(field)}[`"]', text))


def check_model(model: type[BaseModel], schema: Json, where: str) -> list[str]:
    """What is wrong with `model` as a reading (or writing) of `schema`."""
    problems = []
    served = set(schema.get("properties", {}))
    required = set(schema.get("required", []))
    fields = model.model_fields
    for name in sorted(served - set(fields)):
        problems.append(f"{where}: the server has `{name}`, {model.__name__} does not")
    for name, info in fields.items():
        if info.is_required() and name not in required:
            problems.append(f"{where}: {model.__name__} requires `{name}`, the server may omit it")
        if name not in served and not contract_names(name):
            problems.append(
                f"{where}: {model.__name__}.{name} is neither served nor in the contract"
            )
    return problems


def test_every_documented_endpoint_has_an_sdk_operation() -> None:
    covered = {endpoint(call) for call, _, _ in OPERATIONS}
    missing = documented_endpoints() - covered - set(SAME_AS)
    assert not missing, f"no SDK operation for {sorted(missing)}"


def test_the_sdk_models_match_the_served_schema(openapi: Json) -> None:
    problems: list[str] = []
    paths = openapi["paths"]
    for call, body, answer in OPERATIONS:
        method, path = endpoint(call)
        operation = paths.get(path, {}).get(method)
        assert operation is not None, f"the SDK calls {method.upper()} {path}, not served"
        if body is not None:
            content = operation.get("requestBody", {}).get("content", {})
            schema = resolve(content["application/json"]["schema"], openapi)
            problems += check_model(body, schema, f"{method.upper()} {path} body")
        if answer is not None:
            status = next(code for code in operation["responses"] if code.startswith("2"))
            content = operation["responses"][status].get("content", {})
            schema = resolve(content["application/json"]["schema"], openapi)
            problems += check_model(answer, schema, f"{method.upper()} {path} answer")
    components = openapi["components"]["schemas"]
    for name, model in NESTED.items():
        if name in components:
            problems += check_model(model, components[name], f"component {name}")
    assert not problems, "\n".join(problems)


def test_a_v11_answer_reads_with_the_v12_fields_defaulted() -> None:
    v11 = {
        "results": [
            {
                "document_id": "a.txt", "chunk_index": 0, "text": "Notice is one month.",
                "score": 0.5, "scores": {"vector": 0.5, "keyword": None}, "filename": "a.txt",
                "format": "txt", "page_start": None, "page_end": None, "headings": [],
                "metadata": {}, "ocr": None, "from_v13": True,
            }
        ],
        "took_ms": 3.2,
    }  # fmt: skip
    response = SearchResponse.model_validate(v11)
    hit = response.results[0]
    assert (hit.excerpt, hit.context, hit.explain, hit.highlights) == (None, None, None, [])
    assert hit.scores.rerank is None and response.reranked is False
    assert hit.best_text == "Notice is one month."
    assert hit.to_json()["from_v13"] is True  # a newer server's field is kept


def test_a_search_sends_only_the_options_given() -> None:
    call = ops.search("idx", "notice period", top_k=3)
    assert call.json == {"query": "notice period", "top_k": 3}
    full = ops.search(
        "idx", "q", mode="keyword", filter={"year": {"gte": 2019}}, rerank={"candidates": 20},
        expand={"neighbors": 1}, excerpt=False, explain=True, score_threshold=0.2,
        max_chunks_per_document=2,
    )  # fmt: skip
    assert full.json == {
        "query": "q", "mode": "keyword", "filter": {"year": {"gte": 2019}},
        "max_chunks_per_document": 2, "score_threshold": 0.2, "rerank": {"candidates": 20},
        "expand": {"neighbors": 1}, "excerpt": False, "explain": True,
    }  # fmt: skip


def test_paths_quote_names_as_one_segment() -> None:
    call = ops.get_document("idx", "reports/2026 q1.pdf")
    assert call.path == "/v1/indexes/idx/documents/reports%2F2026%20q1.pdf"
    assert httpx.URL("http://h" + call.path).path.endswith("2026 q1.pdf")
