"""The `contextual_headers` index setting through the service: shown, kept, fixed once the
index exists, and the stored text left as the chunk alone."""

from __future__ import annotations

from docingest.pipeline.settings import Settings
from tests.support.http_client import ApiClient, assert_error


def test_contextual_headers_are_an_index_setting_fixed_once_created(api: ApiClient) -> None:
    http = api.http
    created = http.put("/v1/indexes/headed", json={"contextual_headers": True})
    assert created.status_code == 201, created.text
    assert created.json()["contextual_headers"] is True
    assert http.put("/v1/indexes/headed", json={"contextual_headers": True}).status_code == 200
    message = assert_error(
        http.put("/v1/indexes/headed", json={"contextual_headers": False}), 409, "index_conflict"
    )
    assert "contextual_headers" in message
    assert http.get("/v1/indexes/headed").json()["contextual_headers"] is True
    plain = http.put("/v1/indexes/plain-default")
    assert plain.json()["contextual_headers"] is Settings().contextual_headers

    text = b"Parental leave lasts sixteen weeks.\n\nIt may be split into two parts."
    api.ingest("headed", text, filename="leave.txt", metadata={"title": "HR handbook"})
    results = api.search("headed", "how long is parental leave", top_k=1)
    assert results[0]["text"] == text.decode()  # the header is embedded, never stored
