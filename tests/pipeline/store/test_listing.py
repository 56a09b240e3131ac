"""Document listing on both engines: `document_id` order a page at a time, filters, a cursor
stable under concurrent writes, records of older releases, and a cost that follows the page
size, not the index (`docingest.pipeline.store.ordering`)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from docingest.pipeline.errors import IndexNotFound
from docingest.pipeline.store import SearchFilter, StoredDocument, VectorStore
from docingest.pipeline.store.ordering import id_of, order_key
from docingest.pipeline.store.requests import point_of
from tests.pipeline.store.test_store import CONFIG, ENGINES, records, store_settings

PREFIXES = ["a", "reports/2024/quarterly-", "reports/2024/q", "ü", "x", "日本"]


def mixed_ids(count: int, seed: int = 7) -> list[str]:
    """Ids that share long prefixes (past several 6-byte keys) and multi-byte characters."""
    rng = random.Random(seed)
    ids: set[str] = set()
    while len(ids) < count:
        tail = "".join(rng.choice("ab/é0-") for _ in range(rng.randint(0, 14)))
        ids.add(rng.choice(PREFIXES) + tail)
    return sorted(ids)


def put(store: VectorStore, document_id: str, version: int = 1, **metadata: object) -> None:
    texts = [f"text of {document_id}", "more"]
    store.write_chunks("docs", records(document_id, version, texts, metadata=metadata))
    store.publish("docs", document_id, version)


def pages(store: VectorStore, limit: int, **options: object) -> list[list[str]]:
    """Every page of the listing, as ids, following the cursor to the end."""
    out, after = [], None
    while True:
        page = store.document_page("docs", limit=limit, after=after, **options)  # type: ignore[arg-type]
        out.append([document.document_id for document in page.documents])
        if page.next_after is None:
            return out
        assert page.documents and page.next_after == page.documents[-1].document_id
        after = page.next_after


@pytest.fixture(params=ENGINES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> VectorStore:
    vector_store = VectorStore.open(store_settings(request.param, tmp_path))
    vector_store.create_index("docs", CONFIG)
    request.addfinalizer(vector_store.close)
    return vector_store


def test_order_keys_sort_like_the_ids() -> None:
    ids = [*mixed_ids(300), "abcdef", "abcdefg", "abcde", "a" * 512, "\U0001f600", "z"]
    assert sorted(ids, key=order_key) == sorted(ids)
    for document_id in ids:
        assert id_of(order_key(document_id)) == document_id
    assert id_of(order_key("a日本")[:1]) is None  # six bytes end inside a character


def test_pages_follow_document_id_order(store: VectorStore) -> None:
    ids = mixed_ids(60)
    for number, document_id in enumerate(reversed(ids)):
        put(store, document_id, n=number % 3)
    assert [d.document_id for d in store.list_documents("docs")] == ids
    for limit in (1, 7, 60, 1000):
        listed = pages(store, limit)
        assert [i for page in listed for i in page] == ids
        assert all(len(page) == limit for page in listed[:-1])
    info = store.get_index("docs")
    assert info is not None and (info.documents, info.chunks) == (60, 120)


def test_filters_select_documents_as_search_does(store: VectorStore) -> None:
    ids = mixed_ids(40)
    for number, document_id in enumerate(ids):
        put(store, document_id, n=number % 4, tags=["even" if number % 2 == 0 else "odd"])
    by_n = SearchFilter.parse({"n": 1})
    assert [i for page in pages(store, 3, filter=by_n) for i in page] == ids[1::4]
    any_of = SearchFilter.parse({"document_id": [ids[5], ids[0], "absent"]})
    assert [d.document_id for d in store.list_documents("docs", filter=any_of)] == [ids[0], ids[5]]
    odd = SearchFilter.parse({"tags": "odd", "n": 3})
    assert [d.document_id for d in store.list_documents("docs", filter=odd)] == ids[3::4]


def test_the_cursor_is_stable_under_inserts_and_deletes(store: VectorStore) -> None:
    ids = [f"doc-{n:03}" for n in range(0, 40, 2)]  # even numbers; odd ones arrive later
    for document_id in ids:
        put(store, document_id)
    first = store.document_page("docs", limit=5)
    assert [d.document_id for d in first.documents] == ids[:5]
    assert first.next_after == "doc-008"
    put(store, "doc-001")  # before the cursor: not listed again, nothing repeats
    put(store, "doc-009")  # after it: listed in its place
    store.delete_document("docs", "doc-010")  # the next one goes: the page starts after it
    store.delete_document("docs", "doc-008")  # the cursor's own document goes: no matter
    rest = [i for page in pages_after(store, first.next_after, 4) for i in page]
    assert rest == ["doc-009", *ids[6:]]


def pages_after(store: VectorStore, after: str | None, limit: int) -> list[list[str]]:
    out = []
    while after is not None:
        page = store.document_page("docs", limit=limit, after=after)
        out.append([d.document_id for d in page.documents])
        after = page.next_after
    return out


def test_a_document_with_two_live_versions_is_listed_once_at_its_newest(
    store: VectorStore,
) -> None:
    for document_id in ("a", "b", "c"):
        put(store, document_id, tag="v1")
    put(store, "b", version=2, tag="v2")  # published, not yet retired
    for limit in (1, 2, 3):
        listed = [d for page in pages_docs(store, limit) for d in page]
        assert [(d.document_id, d.version, d.metadata["tag"]) for d in listed] == [
            ("a", 1, "v1"), ("b", 2, "v2"), ("c", 1, "v1"),
        ]  # fmt: skip


def pages_docs(store: VectorStore, limit: int) -> list[list[StoredDocument]]:
    out, after = [], None
    while True:
        page = store.document_page("docs", limit=limit, after=after)
        out.append(page.documents)
        if page.next_after is None:
            return out
        after = page.next_after


def test_records_of_an_older_release_are_given_their_order_keys(store: VectorStore) -> None:
    """Points written without order keys (by the previous release, or imported from its
    export) are listed too: the first listing gives them their keys."""
    put(store, "new")
    for document_id in ("old-b", "old-a"):
        points = [point_of("docs", record) for record in records(document_id, 1, ["x", "y"])]
        for point in points:
            for key in [k for k in point.payload if k.startswith("doc_order_")]:
                del point.payload[key]
            point.payload["state"] = "live"
        store.engine.upsert("docs", points)
    fresh = VectorStore(store.engine)  # another process: nothing cached
    assert [d.document_id for d in fresh.list_documents("docs")] == ["new", "old-a", "old-b"]
    assert [i for page in pages(fresh, 1) for i in page] == ["new", "old-a", "old-b"]


def test_a_page_reads_records_in_proportion_to_its_size_not_the_index(
    store: VectorStore,
) -> None:
    """The O(listed) claim, counted: records the engine returns for one page of 10, from an
    index of 30 documents and from one of 300 (timings are in bench/bench_listing.py)."""
    read = {"records": 0}
    scroll = store.engine.scroll

    def counting(*args: object, **kwargs: object) -> object:
        found = scroll(*args, **kwargs)  # type: ignore[arg-type]
        read["records"] += len(found[0])
        return found

    def page_cost(after: str) -> int:
        read["records"] = 0
        page = store.document_page("docs", limit=10, after=after)
        assert len(page.documents) == 10
        return read["records"]

    ids = mixed_ids(300, seed=3)
    for document_id in ids[:30]:
        put(store, document_id)
    store.list_documents("docs")  # the one-off check for records without order keys
    store.engine.scroll = counting  # type: ignore[method-assign, assignment]
    small = page_cost(ids[9])
    store.engine.scroll = scroll  # type: ignore[method-assign]
    for document_id in ids[30:]:
        put(store, document_id)
    store.engine.scroll = counting  # type: ignore[method-assign, assignment]
    large = page_cost(ids[9])
    # a few batches of limit + 1 each (21 and 23 when written), never the 300 of the index
    assert max(small, large) <= 4 * 11, (small, large)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_listing_beside_indexes_being_created_never_deadlocks(
    engine: str, tmp_path: Path
) -> None:
    """The payload-index cache held its lock across an engine call, while `create_index` held
    the engine's lock and waited for the cache's: a listing beside a creation hung both, and
    every later store call in the process with them (the web page's hung `PUT`)."""
    store = VectorStore.open(store_settings(engine, tmp_path))
    names = [f"docs-{n}" for n in range(30)]
    failures: list[BaseException] = []

    def create() -> None:
        for name in names:
            store.create_index(name, CONFIG)

    def list_them() -> None:
        for turn in range(300):
            try:
                store.document_page(names[turn % len(names)], limit=5)
            except IndexNotFound:
                pass  # not created yet
            except BaseException as exc:
                failures.append(exc)
                return

    threads = [threading.Thread(target=work, daemon=True) for work in (create, list_them)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)  # a deadline with room: a deadlock never ends
    assert not any(thread.is_alive() for thread in threads), "the store deadlocked"
    assert not failures, failures
    assert {info.name for info in store.list_indexes()} >= set(names)
    store.close()
