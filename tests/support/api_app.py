"""Run the real app (`docingest.api.app.create_app`) under uvicorn against a private test
deployment."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from docingest.api.app import create_app
from docingest.pipeline.settings import Settings
from tests.support.paths import CORPUS_DIR
from tests.support.uvicorn_server import serve_app

API_DOC = CORPUS_DIR.parent / "API.md"
"""The contract sits beside the corpus in the shared folder (found the same way)."""
_ENDPOINT = re.compile(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`?\s]*)[^`]*`")


PENDING: dict[tuple[str, str], str] = {}
"""Endpoints of the contract's v1.2 section not served yet, each with the open issue that
builds it. The contract tests hold every other documented endpoint, and check that each of
these is documented and still missing, so an entry must go when its endpoint lands."""


def documented_endpoints(*, pending: bool = False) -> set[tuple[str, str]]:
    """(method, path) of every endpoint the contract names, e.g. `GET /v1/jobs?index=...`;
    those still `PENDING` only with `pending`."""
    assert API_DOC.is_file(), f"the contract is not at {API_DOC}"
    named = {(m.lower(), path) for m, path in _ENDPOINT.findall(API_DOC.read_text())}
    return named if pending else named - set(PENDING)


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
