"""Context, excerpts and a document's chunks through one real `docingest serve` (issue 28):
the context is the exact slice of the extracted text end to end (the parsing child's chunks,
their gaps over the wire, the store, the API), never a mix of versions while a document is
replaced; hostile `expand` bodies and cursors are refused with the contract's error shape,
never a 500; a megabyte on one line gives bounded excerpts, highlights and context (issue
40). RELIABILITY.md, "Context and chunk pages", has the cases."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.chunking.tokens import MAX_TOKEN_CHARS
from docingest.pipeline.prepare import prepare_document
from docingest.pipeline.search.context import CONTEXT_MAX_CHARS
from docingest.pipeline.search.excerpts import EXCERPT_MAX_CHARS, MAX_HIGHLIGHTS
from docingest.pipeline.settings import Settings
from docingest.pipeline.store.chunk_pages import encode_cursor
from tests.support.hostile_service import Deployment, assert_still_serving, deployed
from tests.support.http_client import Json, assert_error
from tests.support.paths import CORPUS_DIR

INDEX = "hostile"
SOURCE = CORPUS_DIR / "txt" / "wikipedia-iwan-roberts-norwich.txt"
DOCUMENT = "roberts/career.txt"  # a slash: the chunks route must still find it


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deployed(tmp_path_factory.mktemp("hostile-answers") / "data") as running:
        running.api.ingest(INDEX, SOURCE, document_id=DOCUMENT)
        yield running
        assert_still_serving(running)
        log = running.process.log()
        assert "Traceback" not in log and "internal_error" not in log, log[-3000:]


def extracted(content: bytes) -> str:
    """The document's extracted text, as the service's parser makes it."""
    return extracted_as(content, SOURCE.name)


def extracted_as(content: bytes, filename: str) -> str:
    """The extracted text of `content` uploaded as `filename`."""
    prepared = prepare_document(
        content, filename=filename, settings=Settings(), chunking=ChunkingSpec()
    )
    return prepared.text


def chunks_path(document_id: str = DOCUMENT) -> str:
    return f"/v1/indexes/{INDEX}/documents/{document_id}/chunks"


def all_chunks(deployment: Deployment, limit: int) -> list[Json]:
    chunks: list[Json] = []
    cursor = None
    while True:
        params: dict[str, str | int] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        response = deployment.api.http.get(chunks_path(), params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["chunks"]) <= limit
        chunks += page["chunks"]
        if (cursor := page["next_cursor"]) is None:
            return chunks


def test_context_and_chunks_are_exact_slices_end_to_end(deployment: Deployment) -> None:
    text = extracted(SOURCE.read_bytes())
    chunks = all_chunks(deployment, limit=7)
    assert [chunk["chunk_index"] for chunk in chunks] == list(range(len(chunks)))
    assert len(chunks) > 10
    for chunk in chunks:
        assert chunk["text"] == text[chunk["start"] : chunk["end"]]
    for expand in ({"neighbors": 3}, {"section": True}):
        for query in ("Norwich City", "Wales international", "Leicester"):
            results = deployment.api.search(INDEX, query, top_k=5, expand=expand,
                                            filter={"document_id": DOCUMENT})  # fmt: skip
            assert results
            for result in results:
                assert result["text"] == text[result["start"] : result["end"]]
                excerpt = result["excerpt"]
                assert excerpt["text"] == result["text"][excerpt["start"] : excerpt["end"]]
                context = result["context"]
                assert context["text"] == text[context["start"] : context["end"]]
                assert result["chunk_index"] in context["chunk_indexes"]


@pytest.mark.parametrize(
    "expand",
    [{"neighbors": 10**12}, {"neighbors": 11}, {"neighbors": -1}, {}, {"section": False},
     {"neighbors": 1, "section": True}, {"neighbours": 1}, "all", [1], {"neighbors": "9" * 400}],
    ids=lambda value: str(value)[:30],
)  # fmt: skip
def test_a_hostile_expand_is_refused(deployment: Deployment, expand: object) -> None:
    response = deployment.api.http.post(
        f"/v1/indexes/{INDEX}/search", json={"query": "Norwich", "expand": expand}
    )
    assert "expand" in assert_error(response, 422, "validation_error")


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({"cursor": "not-a-cursor"}, 400, "invalid_cursor"),
        ({"cursor": "x" * 201}, 422, "validation_error"),
        # version 0: never the live one
        ({"cursor": encode_cursor(INDEX, DOCUMENT, 0, 0)}, 409, "cursor_expired"),
        ({"cursor": "djAuMA"}, 400, "invalid_cursor"),  # the unchecked format of old
        ({"cursor": encode_cursor(INDEX, "another.txt", 0, 0)}, 400, "invalid_cursor"),
        ({"cursor": "dj" + "9" * 100}, 400, "invalid_cursor"),
        ({"limit": 0}, 422, "validation_error"),
        ({"limit": 10**9}, 422, "validation_error"),
    ],
)
def test_a_hostile_chunks_request_is_refused(
    deployment: Deployment, params: dict[str, str | int], status: int, code: str
) -> None:
    assert_error(deployment.api.http.get(chunks_path(), params=params), status, code)


def test_chunks_of_an_unknown_or_deleted_document_are_404(deployment: Deployment) -> None:
    assert_error(deployment.api.http.get(chunks_path("nobody")), 404, "document_not_found")
    deployment.api.ingest(INDEX, b"Short lived. Gone soon.", filename="gone.txt")
    assert deployment.api.http.delete(f"/v1/indexes/{INDEX}/documents/gone.txt").status_code == 204
    assert_error(deployment.api.http.get(chunks_path("gone.txt")), 404, "document_not_found")
    results = deployment.api.search(INDEX, "short lived", expand={"neighbors": 2},
                                    filter={"document_id": "gone.txt"})  # fmt: skip
    assert results == []


def test_a_context_never_mixes_versions_while_the_document_is_replaced(
    deployment: Deployment,
) -> None:
    """Search with `expand` while a new version (the text in capitals) replaces the old one:
    every context is an exact slice of one version's text, and the old cursor expires."""
    old = extracted(SOURCE.read_bytes())
    new_content = SOURCE.read_bytes().upper()
    new = extracted(new_content)
    first = deployment.api.http.get(chunks_path(), params={"limit": 3}).json()
    job_id = deployment.api.submit(INDEX, new_content, filename=SOURCE.name, document_id=DOCUMENT)
    done = threading.Event()

    def wait() -> None:
        deployment.api.wait(job_id)
        done.set()

    def contexts() -> list[Json]:
        results = deployment.api.search(INDEX, "norwich city goals", top_k=5, mode="keyword",
                                        expand={"neighbors": 4},
                                        filter={"document_id": DOCUMENT})  # fmt: skip
        assert results
        return [result["context"] for result in results]

    waiter = threading.Thread(target=wait)
    waiter.start()
    try:
        while not done.is_set():
            for context in contexts():
                span = slice(context["start"], context["end"])
                assert context["text"] in (old[span], new[span])
    finally:
        waiter.join()
    for context in contexts():  # the job is done: only the new version is live
        assert context["text"] == new[context["start"] : context["end"]]
    response = deployment.api.http.get(chunks_path(), params={"cursor": first["next_cursor"]})
    assert_error(response, 409, "cursor_expired")


def test_a_megabyte_on_one_line_gives_bounded_answers(deployment: Deployment) -> None:
    """Issue 40: one 1 MB single-line chunk (a token-sized index, 32,768 tokens of words too
    long for the tokenizer, each one unknown token) gave a 2.1 MB excerpt with 7,813
    highlights per hit, 3.1 MB with `expand`. A token now counts at most MAX_TOKEN_CHARS
    characters, so the megabyte is cut into chunks of at most 16 × 32,768 characters, and
    the excerpt, the highlights and the context are bounded within each."""
    index = "one-line"
    created = deployment.api.http.put(
        f"/v1/indexes/{index}",
        json={"chunking": {"chunk_size": 32_768, "chunk_overlap": 0, "unit": "tokens"}},
    )
    assert created.status_code in (200, 201), created.text
    line = ("x" * 480 + " fuel valve ") * 2_032 + "\n"
    deployment.api.ingest(index, line.encode(), filename="one-line.txt")
    text = extracted_as(line.encode(), "one-line.txt")
    for expand in (None, {"neighbors": 2}, {"section": True}):
        response = deployment.api.http.post(
            f"/v1/indexes/{index}/search",
            json={"query": "fuel valve", "top_k": 3, **({"expand": expand} if expand else {})},
        )
        assert response.status_code == 200, response.text[:300]
        results = response.json()["results"]
        assert len(results) >= 2  # the megabyte is more than one chunk now
        for result in results:
            assert len(result["text"]) <= MAX_TOKEN_CHARS * 32_768
            assert result["text"] == text[result["start"] : result["end"]]
            excerpt = result["excerpt"]
            assert len(excerpt["text"]) <= EXCERPT_MAX_CHARS and "fuel valve" in excerpt["text"]
            assert excerpt["text"] == result["text"][excerpt["start"] : excerpt["end"]]
            assert 0 < len(result["highlights"]) <= MAX_HIGHLIGHTS
            assert any(excerpt["start"] <= at < excerpt["end"] for at, _ in result["highlights"])
            context = result["context"]
            if expand is None:
                assert context is None
                continue
            assert len(context["text"]) <= CONTEXT_MAX_CHARS
            assert context["text"] == text[context["start"] : context["end"]]  # still exact
            assert context["chunk_indexes"] == [result["chunk_index"]]
            middle = result["start"] + (excerpt["start"] + excerpt["end"]) // 2
            assert context["start"] <= middle < context["end"]  # around the excerpt
        held = sum(len(result["text"]) for result in results)
        assert len(response.content) < held + 2 * CONTEXT_MAX_CHARS * len(results)
