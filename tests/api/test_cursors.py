"""Page cursors through real uvicorn, for both listings that hand them out: the documents of
an index and the chunks of a document. A cursor works only in the listing that made it: one
changed by hand, cut short, of the older format, or made by another index, listing or
document is 400 `invalid_cursor` (`docingest.pipeline.cursors`)."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from tests.api.test_documents import DOCS, Api, api  # noqa: F401 (the fixture)
from tests.pipeline.test_documents import INDEX, ingest
from tests.support.api_app import is_contract_error

OTHER = "other-index"


def chunks_path(document_id: str, index: str = INDEX) -> str:
    return f"/v1/indexes/{index}/documents/{document_id}/chunks"


def documents_path(index: str = INDEX) -> str:
    return f"/v1/indexes/{index}/documents"


def page(http: httpx.Client, path: str, **params: Any) -> dict[str, Any]:
    response = http.get(path, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def refused(http: httpx.Client, path: str, cursor: str) -> bool:
    response = http.get(path, params={"limit": 2, "cursor": cursor})
    return is_contract_error(response, status=400, code="invalid_cursor")


def with_position(cursor: str, position: str) -> str:
    """`cursor` with another position and the original check: a hand-made cursor."""
    prefix, _, check = cursor.split(".")
    body = base64.urlsafe_b64encode(position.encode()).decode().rstrip("=")
    return f"{prefix}.{body}.{check}"


def mangled(cursor: str) -> list[str]:
    """Every way the tests spoil a real cursor: cut short, extended, one character changed."""
    flipped = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
    return [cursor[:-1], cursor[:-6], cursor + "A", flipped, cursor.replace("c2.", "c1.", 1)]


@pytest.fixture
def stored(api: Api) -> Api:  # noqa: F811
    """Documents a to e, of five chunks each, in two indexes."""
    api.services.ensure_index(OTHER)
    for index in (INDEX, OTHER):
        for name in ("a", "b", "c", "d", "e"):
            ingest(api.services, name, 5, index=index)
    return api


def test_a_documents_cursor_works_only_in_its_own_listing(stored: Api) -> None:
    http = stored.http
    first = page(http, documents_path(), limit=2)
    cursor = first["next_cursor"]
    assert [d["document_id"] for d in first["documents"]] == ["a", "b"]
    following = page(http, documents_path(), limit=2, cursor=cursor)
    assert [d["document_id"] for d in following["documents"]] == ["c", "d"]
    assert refused(http, documents_path(OTHER), cursor)  # another index
    assert refused(http, chunks_path("a"), cursor)  # another listing
    assert refused(http, documents_path(), with_position(cursor, "c"))  # forged
    for spoilt in mangled(cursor):
        assert refused(http, documents_path(), spoilt), spoilt


def test_a_chunks_cursor_works_only_in_its_own_listing(stored: Api) -> None:
    http = stored.http
    first = page(http, chunks_path("a"), limit=2)
    cursor = first["next_cursor"]
    assert [c["chunk_index"] for c in first["chunks"]] == [0, 1]
    following = page(http, chunks_path("a"), limit=2, cursor=cursor)
    assert [c["chunk_index"] for c in following["chunks"]] == [2, 3]
    assert refused(http, chunks_path("b"), cursor)  # another document
    assert refused(http, chunks_path("a", OTHER), cursor)  # another index, the same id
    assert refused(http, documents_path(), cursor)  # another listing
    version = first["version"]
    assert refused(http, chunks_path("a"), with_position(cursor, f"v{version}.4"))  # forged
    for spoilt in mangled(cursor):
        assert refused(http, chunks_path("a"), spoilt), spoilt
