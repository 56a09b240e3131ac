"""v1.2 filters on every engine: each filter selects the documents it says (by hand), and Edge,
qdrant-client's local mode (the server's stand-in) and Postgres give the same answer to every
filter, including generated combinations."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from docingest.pipeline.errors import IndexConflict, InvalidFilter, InvalidMetadata
from docingest.pipeline.store import IndexConfig, SearchFilter, VectorStore
from docingest.pipeline.store.schema import parse_datetime
from tests.pipeline.store.test_store import CONFIG, ENGINES, records, store_settings, unit_vector

DOCUMENTS: dict[str, dict[str, Any]] = {
    "d1": {"dept": "legal", "tags": ["a", "b"], "year": 2024, "public": True, "score": 0.9,
           "published": "2024-03-01T10:00:00Z"},
    "d2": {"dept": "ops", "tags": ["c"], "year": 2019, "public": False, "score": 0.5,
           "published": "2019-12-31T23:30:00-02:00"},  # 2020-01-01T01:30Z
    "d3": {"dept": "legal", "tags": ["b", "c"], "year": 2023, "published": "2023-06-15"},
    "d4": {"dept": "hr", "year": 2021, "score": 2, "note": ""},
    "d5": {},
}  # fmt: skip
INGESTED = {"d1": "2026-01-05T00:00:00Z", "d2": "2026-01-10T12:00:00Z", "d3": None}
SCHEMA = IndexConfig(
    embedding=CONFIG.embedding,
    metadata_schema={"year": "integer", "published": "datetime", "score": "float"},
)


def _fill(store: VectorStore, config: IndexConfig = SCHEMA) -> None:
    store.create_index("docs", config)
    for document_id, metadata in DOCUMENTS.items():
        written = records(document_id, 1, [f"{document_id} one", f"{document_id} two"],
                          metadata=metadata)  # fmt: skip
        if document_id in INGESTED:  # d3: as a point written before ingest times were stored
            fields = replace(written[0].document, ingested_at=INGESTED[document_id])
            written = [replace(record, document=fields) for record in written]
        store.write_chunks("docs", written)
        store.publish("docs", document_id, 1)


@pytest.fixture(params=ENGINES, scope="module")
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VectorStore]:
    """One filled store per engine for the module (the tests only read it)."""
    tmp_path = tmp_path_factory.mktemp(request.param)
    vector_store = VectorStore.open(store_settings(request.param, tmp_path))
    _fill(vector_store)
    yield vector_store
    vector_store.close()


def found(
    store: VectorStore, raw: dict[str, Any], schema: Any = SCHEMA.metadata_schema
) -> set[str]:
    selector = SearchFilter.parse(raw, schema=schema)
    hits = store.query_dense("docs", unit_vector("q"), limit=100, filter=selector)
    return {hit.document_id for hit in hits}


EXPECTED: list[tuple[dict[str, Any], set[str]]] = [
    ({"year": {"gte": 2021}}, {"d1", "d3", "d4"}),
    ({"year": {"gte": 2019, "lt": 2023}}, {"d2", "d4"}),
    ({"year": {"gt": 2019, "lte": 2023}}, {"d3", "d4"}),
    ({"year": {"gt": 2020.5}}, {"d1", "d3", "d4"}),  # a float bound on integers
    ({"score": {"gte": 0.5, "lt": 2}}, {"d1", "d2"}),
    ({"score": 2}, {"d4"}),  # an integer value of a float field
    ({"score": {"in": [0.5, 2]}}, {"d2", "d4"}),
    ({"published": {"gte": "2024-01-01"}}, {"d1"}),
    ({"published": {"lt": "2020-01-01T02:00:00+00:00"}}, {"d2"}),  # offsets compare as instants
    ({"published": {"gt": "2020-01-01T01:30:00Z"}}, {"d1", "d3"}),
    ({"published": "2023-06-15T00:00:00Z"}, {"d3"}),  # equality as an instant
    ({"published": {"ne": "2023-06-15T00:00:00Z"}}, {"d1", "d2", "d4", "d5"}),
    ({"ingested_at": {"gte": "2026-01-06T00:00:00Z"}}, {"d2"}),
    ({"ingested_at": {"lt": "2026-01-06T00:00:00Z"}}, {"d1", "d4", "d5"}),  # d4, d5: 2025
    ({"ingested_at": {"exists": False}}, {"d3"}),
    ({"dept": {"in": ["legal", "hr"]}}, {"d1", "d3", "d4"}),
    ({"dept": {"nin": ["legal", "hr"]}}, {"d2", "d5"}),
    ({"dept": {"ne": "legal"}}, {"d2", "d4", "d5"}),  # a missing field is not "legal"
    ({"tags": {"all": ["b", "c"]}}, {"d3"}),
    ({"tags": {"all": ["b"]}}, {"d1", "d3"}),
    ({"tags": {"ne": "c"}}, {"d1", "d4", "d5"}),  # no element is "c"
    ({"tags": {"exists": True}}, {"d1", "d2", "d3"}),
    ({"tags": {"exists": False}}, {"d4", "d5"}),
    ({"note": {"exists": True}}, {"d4"}),  # an empty string is a value
    ({"public": True}, {"d1"}),
    ({"public": {"ne": True}}, {"d2", "d3", "d4", "d5"}),
    ({"public": {"exists": True}}, {"d1", "d2"}),
    ({"document_id": {"in": ["d1", "d5"]}}, {"d1", "d5"}),
    ({"document_id": {"ne": "d1"}, "dept": "legal"}, {"d3"}),
    ({"$or": [{"dept": "ops"}, {"year": {"gte": 2024}}]}, {"d1", "d2"}),
    ({"$and": [{"dept": "legal"}, {"tags": "c"}]}, {"d3"}),
    ({"$not": {"dept": "legal"}}, {"d2", "d4", "d5"}),
    ({"$not": {"dept": "legal", "year": 2024}}, {"d2", "d3", "d4", "d5"}),  # not (a and b)
    ({"$or": [{"$not": {"tags": {"exists": True}}}, {"tags": "a"}]}, {"d1", "d4", "d5"}),
    ({"dept": "legal", "$or": [{"year": 2023}, {"public": True}]}, {"d1", "d3"}),
    ({"year": {"gte": 2020}, "$not": {"$or": [{"dept": "hr"}, {"tags": "a"}]}}, {"d3"}),
    ({"undeclared": {"gte": 1}}, set()),
]


@pytest.mark.parametrize(("raw", "expected"), EXPECTED, ids=[str(r) for r, _ in EXPECTED])
def test_each_filter_selects_what_it_says(
    store: VectorStore, raw: dict[str, Any], expected: set[str]
) -> None:
    assert found(store, raw) == expected


def test_undeclared_fields_infer_their_type(store: VectorStore) -> None:
    # Without a schema, a range of strings is a range of datetimes, of numbers numeric.
    assert found(store, {"published": {"gte": "2024-01-01"}}, schema=None) == {"d1"}
    assert found(store, {"year": {"lt": 2021}}, schema=None) == {"d2"}
    assert found(store, {"score": 0.5}, schema=None) == {"d2"}
    # A range never matches a boolean, though Edge stores booleans as 0/1.
    assert found(store, {"public": {"gte": 0}}, schema=None) == set()


def _random_filter(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    leaves: list[dict[str, Any]] = [
        {"dept": rng.choice(["legal", "ops", "hr", "x"])},
        {"dept": {"in": rng.sample(["legal", "ops", "hr", "x"], 2)}},
        {"dept": {"ne": rng.choice(["legal", "ops"])}},
        {"tags": {"all": rng.sample(["a", "b", "c"], rng.randint(1, 2))}},
        {"tags": {"exists": rng.random() < 0.5}},
        {"year": {rng.choice(["gte", "gt", "lte", "lt"]): rng.randint(2018, 2025)}},
        {"score": {"gte": rng.choice([0, 0.5, 0.9, 1.5])}},
        {"published": {"lt": f"{rng.randint(2019, 2025)}-06-01T00:00:00Z"}},
        {"public": rng.random() < 0.5},
        {"ingested_at": {"gte": f"2026-01-0{rng.randint(1, 9)}T00:00:00Z"}},
        {"document_id": {"nin": rng.sample(list(DOCUMENTS), 2)}},
    ]
    if depth < 2 and rng.random() < 0.4:
        group = rng.choice(["$and", "$or", "$not"])
        members = [_random_filter(rng, depth + 1) for _ in range(rng.randint(1, 3))]
        return {"$not": members[0]} if group == "$not" else {group: members}
    return rng.choice(leaves)


def test_every_engine_agrees_on_generated_filters(tmp_path: Path) -> None:
    stores = [VectorStore.open(store_settings(e, tmp_path / e)) for e in ENGINES]
    try:
        for store in stores:
            _fill(store)
        rng = random.Random(28)
        answers: set[frozenset[str]] = set()
        for _ in range(150):
            raw: dict[str, Any] = {}
            for part in (_random_filter(rng) for _ in range(rng.randint(1, 2))):
                raw.update(part)
            first, *others = (found(store, raw) for store in stores)
            for engine, other in zip(ENGINES[1:], others, strict=True):
                assert other == first, (engine, raw)
            answers.add(frozenset(first))
        assert len(answers) > 10  # the generated filters did select different sets
    finally:
        for store in stores:
            store.close()


@pytest.mark.parametrize(
    "raw",
    [
        {"year": {"gte": "2020"}},  # a string for a declared integer
        {"year": "2024"},
        {"year": 2024.5},
        {"published": {"gte": "yesterday"}},
        {"published": {"gte": "2024-13-01"}},
        {"published": 2024},
        {"score": "high"},
        {"dept": {"gte": 1, "lte": "z"}},
        {"dept": {"between": [1, 2]}},
        {"dept": {}},
        {"dept": {"exists": "yes"}},
        {"dept": {"in": []}},
        {"dept": {"in": "legal"}},
        {"dept": {"in": ["a"] * 1001}},
        {"dept": {"in": ["a", 1]}},
        {"tags": {"all": [0.5]}},
        {"public": {"in": [True]}},
        {"year": {"gte": 10**400}},
        {"year": {"gte": float("inf")}},
        {"document_id": {"gte": 3}},
        {"ingested_at": {"gte": 3}},
        {"$not": {}},
        {"$not": [{"dept": "a"}]},
        {"$or": []},
        {"$or": [{}]},
        {"$or": {"dept": "a"}},
        {"$xor": [{"dept": "a"}]},
        {"$or": ["dept"]},
        {"$not": {"$not": {"$not": {"$not": {"$not": {"dept": "a"}}}}}},
        {"$or": [{"dept": {"in": [str(i) for i in range(1000)]}}] * 5},
    ],
)
def test_malformed_filters_are_invalid_filter(raw: dict[str, Any]) -> None:
    with pytest.raises(InvalidFilter) as raised:
        SearchFilter.parse(raw, schema=SCHEMA.metadata_schema)
    assert raised.value.code == "invalid_filter"


def test_errors_name_the_field() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"year": {"gte": "2020"}}, "'year'"),
        ({"$or": [{"published": {"lt": "soon"}}]}, "'published'"),
        ({"dept": {"regex": "a"}}, "'dept'"),
    ]
    for raw, field in cases:
        with pytest.raises(InvalidFilter, match=field):
            SearchFilter.parse(raw, schema=SCHEMA.metadata_schema)


def test_nesting_and_sizes_up_to_their_bounds_are_accepted() -> None:
    deep: dict[str, Any] = {"dept": "a"}
    for _ in range(4):
        deep = {"$not": deep}
    assert SearchFilter.parse(deep) is not None
    wide = {"$or": [{f"k{i}": i} for i in range(64)]}
    assert SearchFilter.parse(wide) is not None
    with pytest.raises(InvalidFilter):
        SearchFilter.parse({"$or": [{f"k{i}": i} for i in range(65)]})
    assert SearchFilter.parse({"dept": {"in": [str(i) for i in range(1000)]}}) is not None


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("2026-01-31", "2026-01-31T00:00:00Z"),
        ("2026-01-31T09:30:00Z", "2026-01-31T09:30:00Z"),
        ("2026-01-31 09:30", "2026-01-31T09:30:00Z"),
        ("2026-01-31T09:30:00.123456789+01:00", "2026-01-31T08:30:00.123456Z"),
        ("2026-01-31t09:30:00z", None),
        ("2026-02-30", None),
        ("31/01/2026", None),
        ("2026-01-31T09:30:00+0100", None),
        ("9999-12-31T23:59:59-23:59", None),  # year 10000 in UTC: OverflowError before
        ("0001-01-01T00:30:00+01:00", None),  # year 0 in UTC
        ("9999-12-31T23:59:59+00:00", "9999-12-31T23:59:59Z"),
        ("0001-01-01T00:30:00+00:30", "0001-01-01T00:00:00Z"),
    ],
)
def test_datetimes(text: str, normalised: str | None) -> None:
    assert parse_datetime(text) == normalised


# --- the metadata schema ----------------------------------------------------------------


def test_schema_fields_are_added_and_a_type_change_conflicts(tmp_path: Path) -> None:
    for engine in ENGINES:
        with VectorStore.open(store_settings(engine, tmp_path / engine)) as store:
            _fill(store)
            more = SCHEMA.model_copy(update={"metadata_schema": {"dept": "keyword"}})
            info, created = store.create_index("docs", more)
            assert not created
            assert info.metadata_schema == {**(SCHEMA.metadata_schema or {}), "dept": "keyword"}
            assert store.create_index("docs", CONFIG)[0].metadata_schema == info.metadata_schema
            changed = SCHEMA.model_copy(update={"metadata_schema": {"year": "keyword"}})
            with pytest.raises(IndexConflict, match="year"):
                store.create_index("docs", changed)
            indexed = store.engine.payload_indexes("docs")
            if indexed is not None:  # local mode keeps no payload indexes
                assert {"metadata.dept", "metadata.published", "ingested_at"} <= indexed
            # a declared type is enforced on every write, whichever entry point made it
            with pytest.raises(InvalidMetadata, match="'year'"):
                store.write_chunks("docs", records("d9", 1, ["x"], metadata={"year": "2024"}))
