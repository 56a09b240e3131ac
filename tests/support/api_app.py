"""Run the real app (`docingest.api.app.create_app`) under uvicorn against a private test
deployment."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from docingest.api.app import create_app
from docingest.pipeline.services import Services
from docingest.pipeline.settings import Settings
from docingest.workers import context
from docingest.workers.app import create_celery_app
from docingest.workers.embedded import EmbeddedWorker
from tests.support.paths import REPO_DIR
from tests.support.uvicorn_server import serve_app

API_DOC = REPO_DIR / "docs" / "reference" / "http-api.md"
"""The contract, in the project's docs (the HTTP API reference)."""
PLANNED_HEADING = "## Planned:"
"""Where the contract's agreed but not yet served part begins (to the end of the page)."""
_ENDPOINT = re.compile(
    r"`(GET|POST|PUT|PATCH|DELETE) (/[^`?\s]*)[^`]*`|^ {4}(GET|POST|PUT|PATCH|DELETE) (/\S*)", re.M
)


def _endpoints(text: str) -> set[tuple[str, str]]:
    """(method, path) of every endpoint named in `text`: inline, as `GET /v1/jobs?index=...`
    (the query string is not part of the path), or as an indented request line."""
    found = set()
    for inline_method, inline_path, block_method, block_path in _ENDPOINT.findall(text):
        method, path = (inline_method, inline_path) if inline_method else (block_method, block_path)
        found.add((method.lower(), path.split("?", 1)[0]))
    return found


def _contract() -> tuple[str, str]:
    """The contract's served part and its planned part."""
    assert API_DOC.is_file(), f"the contract is not at {API_DOC}"
    served, _, planned = API_DOC.read_text(encoding="utf-8").partition(PLANNED_HEADING)
    return served, planned


def documented_endpoints() -> set[tuple[str, str]]:
    """(method, path) of every endpoint the contract says the service serves."""
    return _endpoints(_contract()[0])


def planned_endpoints() -> set[tuple[str, str]]:
    """(method, path) of every endpoint of the contract's planned part (not served yet)."""
    return _endpoints(_contract()[1])


@contextmanager
def api_client(
    settings: Settings, *, client_options: dict[str, Any] | None = None, **app_options: Any
) -> Iterator[httpx.Client]:
    """An httpx client on the app served by real uvicorn (lifespan and all)."""
    app = create_app(settings, **app_options)
    options: dict[str, Any] = {"timeout": 30.0, **(client_options or {})}
    with (
        serve_app(app, lifespan="on") as base_url,
        httpx.Client(base_url=base_url, **options) as client,
    ):
        yield client


@contextmanager
def api_with_worker(
    settings: Settings, *, name: str, concurrency: int = 1
) -> Iterator[httpx.Client]:
    """`api_client` on a whole deployment in this process: the app and an embedded Celery
    worker (as `docingest serve` runs them) sharing one `Services`, so uploads are ingested."""
    services = Services(settings, owns_store=True)
    celery = create_celery_app(settings)
    context.install(services)
    worker = EmbeddedWorker(celery, concurrency=concurrency, hostname=f"{name}@%h")
    worker.start()
    try:
        with api_client(settings, services=services, celery=celery) as client:
            yield client
    finally:
        worker.stop(timeout=30)
        context.forget()
        services.close()


def upload(
    client: httpx.Client,
    index: str,
    data: bytes,
    *,
    filename: str = "notes.txt",
    headers: dict[str, str] | None = None,
    **fields: str,
) -> httpx.Response:
    """POST one file to the index's documents, as a browser form would."""
    return client.post(
        f"/v1/indexes/{index}/documents",
        files={"file": (filename, data, "text/plain")},
        data=fields,
        headers=headers,
    )


def is_contract_error(response: httpx.Response, *, status: int, code: str | None = None) -> bool:
    """Whether the response is the contract's error shape with `status` (and `code`)."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert isinstance(body["error"]["code"], str) and body["error"]["code"], body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body
    if code is not None:
        assert body["error"]["code"] == code, body
    return True
