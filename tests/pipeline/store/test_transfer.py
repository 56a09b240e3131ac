"""Moving an index between engines: `docingest export` from the embedded store, `docingest
import` into another store (qdrant-client standing in for a server), nothing re-embedded."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from docingest.pipeline.errors import IndexConflict, InvalidExport
from docingest.pipeline.settings import Settings
from docingest.pipeline.sparse import encode_query
from docingest.pipeline.store import VectorStore
from docingest.pipeline.store.transfer import export_index, import_index
from tests.pipeline.store.test_store import (
    CONFIG,
    ENGINES,
    records,
    store_settings,
    stored,
    unit_vector,
)

REPO = Path(__file__).resolve().parents[3]


def filled(store: VectorStore) -> None:
    store.create_index("docs", CONFIG)
    stored(store, "docs", "d1", 1, ["alpha harbour", "beta lighthouse"])
    stored(store, "docs", "d2", 1, ["gamma harbour"])
    store.write_chunks("docs", records("d3", 1, ["staged only"]))  # never published


@pytest.mark.parametrize(
    ("source_engine", "target_engine"),
    [("edge", "qdrant-client"), ("edge", "postgres"), ("postgres", "edge")],
)
def test_export_then_import_gives_the_same_index_and_results(
    tmp_path: Path, source_engine: str, target_engine: str
) -> None:
    """An index moves between any two engines without re-embedding."""
    out = io.StringIO()
    with VectorStore.open(store_settings(source_engine, tmp_path / "source")) as source:
        filled(source)
        assert export_index(source, "docs", out) == 3  # live points only
        expected_sparse = source.query_sparse("docs", encode_query("harbour"), limit=5)
        expected_dense = source.query_dense("docs", unit_vector("gamma harbour"), limit=5)
    with VectorStore.open(store_settings(target_engine, tmp_path / "target")) as target:
        name, count = import_index(target, lines_of(out.getvalue()), index="moved")
        assert (name, count) == ("moved", 3)
        assert target.index_config("moved") == CONFIG
        assert [(d.document_id, d.chunks) for d in target.list_documents("moved")] == [
            ("d1", 2),
            ("d2", 1),
        ]
        sparse = target.query_sparse("moved", encode_query("harbour"), limit=5)
        dense = target.query_dense("moved", unit_vector("gamma harbour"), limit=5)
    # the same chunks match; keyword scores differ by IDF, which counted the staged point too
    assert {h.id for h in sparse} == {h.id for h in expected_sparse} != set()
    assert [(h.id, round(h.score, 5)) for h in dense] == [
        (h.id, round(h.score, 5)) for h in expected_dense
    ]


def lines_of(text: str) -> Callable[[], Iterator[str]]:
    """The file's lines, as often as the import reads them."""
    return lambda: iter(io.StringIO(text))


def exported(tmp_path: Path) -> str:
    out = io.StringIO()
    with VectorStore.open(Settings(data_dir=tmp_path / "source")) as source:
        filled(source)
        export_index(source, "docs", out)
    return out.getvalue()


def test_a_file_that_is_no_export_is_refused(tmp_path: Path) -> None:
    with VectorStore.open(Settings(qdrant_url=":memory:", data_dir=tmp_path)) as target:
        with pytest.raises(InvalidExport, match="not a docingest-index-export"):
            import_index(target, lines_of('{"hello": 1}\n'))
        assert target.list_indexes() == []


def damaged(text: str, how: str) -> str:
    lines = text.splitlines(keepends=True)
    if how == "cut mid-line":
        return text[: len(text) * 2 // 3]
    if how == "cut at a line end":
        return "".join(lines[:-2])
    if how == "bad vector":
        point = json.loads(lines[1])
        return "".join([lines[0], json.dumps({**point, "dense": "%%%"}) + "\n", *lines[2:]])
    if how == "wrong count":
        return "".join([*lines[:-1], '{"end": true, "points": 7}\n'])
    raise AssertionError(how)


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("cut mid-line", "is not JSON"),
        ("cut at a line end", "truncated"),
        ("bad vector", "Line 2 of the export is not a point"),
        ("wrong count", "holds 7 points but 3 were read"),
    ],
)
@pytest.mark.parametrize("engine", ENGINES)
def test_a_damaged_file_leaves_nothing_behind(
    tmp_path: Path, engine: str, how: str, message: str
) -> None:
    """A truncated import exited 1 but left an empty index behind."""
    text = damaged(exported(tmp_path), how)
    with VectorStore.open(store_settings(engine, tmp_path / "target")) as target:
        with pytest.raises(InvalidExport, match=message):
            import_index(target, lines_of(text))
        assert target.list_indexes() == []


@pytest.mark.parametrize("engine", ENGINES)
def test_a_failed_write_deletes_the_index_it_created(tmp_path: Path, engine: str) -> None:
    """A point the store refuses after the file was checked: the new index goes again."""
    lines = exported(tmp_path).splitlines(keepends=True)
    point = json.loads(lines[2])
    refused = json.dumps({**point, "id": "not-a-uuid"}) + "\n"  # Qdrant wants a uuid
    text = "".join([lines[0], lines[1], refused, *lines[3:]])
    with VectorStore.open(store_settings(engine, tmp_path / "target")) as target:
        with pytest.raises(Exception):  # noqa: B017 - whatever the engine raises
            import_index(target, lines_of(text))
        assert target.list_indexes() == []


def test_an_existing_index_is_merged_into_only_when_asked(tmp_path: Path) -> None:
    """Importing into an existing index merged silently."""
    text = exported(tmp_path)
    with VectorStore.open(Settings(qdrant_url=":memory:", data_dir=tmp_path)) as target:
        target.create_index("docs", CONFIG)
        stored(target, "docs", "mine", 1, ["my own chunk"])
        with pytest.raises(IndexConflict, match="--merge"):
            import_index(target, lines_of(text))
        assert [d.document_id for d in target.list_documents("docs")] == ["mine"]
        assert import_index(target, lines_of(text), merge=True) == ("docs", 3)
        assert [d.document_id for d in target.list_documents("docs")] == ["d1", "d2", "mine"]


def test_a_bad_config_is_a_clear_message(tmp_path: Path) -> None:
    lines = exported(tmp_path).splitlines(keepends=True)
    header = json.loads(lines[0])
    header["config"]["chunking"]["chunk_size"] = "big"
    header["config"]["embedding"]["dimensions"] = -3
    text = "".join([json.dumps(header) + "\n", *lines[1:]])
    with VectorStore.open(Settings(qdrant_url=":memory:", data_dir=tmp_path)) as target:
        with pytest.raises(InvalidExport) as raised:
            import_index(target, lines_of(text))
    message = raised.value.message
    assert message.startswith("The export's index config is invalid: ")
    assert "chunking.chunk_size: " in message and "embedding.dimensions: " in message
    assert "pydantic" not in message and "errors.pydantic.dev" not in message


def test_the_commands_move_an_index_between_data_directories(tmp_path: Path) -> None:
    with VectorStore.open(Settings(data_dir=tmp_path / "a")) as source:
        filled(source)
    exported = tmp_path / "docs.jsonl"

    def docingest(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
        env = {"PATH": "/usr/bin:/bin", "DOCINGEST_DATA_DIR": str(data_dir), "HOME": str(tmp_path)}
        return subprocess.run(
            [sys.executable, "-m", "docingest", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    done = docingest("export", "docs", str(exported), data_dir=tmp_path / "a")
    assert done.returncode == 0, done.stderr
    assert "exported 3 points of index 'docs'" in done.stderr
    done = docingest("import", str(exported), data_dir=tmp_path / "b")
    assert done.returncode == 0, done.stderr
    missing = docingest("export", "nothing", str(tmp_path / "x"), data_dir=tmp_path / "b")
    assert missing.returncode == 1
    assert "index_not_found" in missing.stderr
    with VectorStore.open(Settings(data_dir=tmp_path / "b")) as moved:
        assert moved.count_points("docs", state="live") == 3
        assert moved.count_points("docs") == 3


def test_the_import_command_refuses_merges_and_damaged_files_clearly(tmp_path: Path) -> None:
    with VectorStore.open(Settings(data_dir=tmp_path / "a")) as source:
        filled(source)
        with (tmp_path / "docs.jsonl").open("w") as out:
            export_index(source, "docs", out)
    whole = (tmp_path / "docs.jsonl").read_text()
    (tmp_path / "cut.jsonl").write_text(whole[: len(whole) // 2])
    header, *rest = whole.splitlines(keepends=True)
    bad = json.loads(header)
    bad["config"]["embedding"]["dimensions"] = "many"
    (tmp_path / "bad-config.jsonl").write_text(json.dumps(bad) + "\n" + "".join(rest))

    def docingest(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {"PATH": "/usr/bin:/bin", "DOCINGEST_DATA_DIR": str(tmp_path / "b")}
        return subprocess.run(
            [sys.executable, "-m", "docingest", *args],
            cwd=REPO,
            env={**env, "HOME": str(tmp_path)},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )

    cut = docingest("import", str(tmp_path / "cut.jsonl"))
    assert cut.returncode == 1
    assert "invalid_export: Line" in cut.stderr and "truncated or damaged" in cut.stderr
    assert "Traceback" not in cut.stderr
    config = docingest("import", str(tmp_path / "bad-config.jsonl"))
    assert config.returncode == 1 and "Traceback" not in config.stderr
    assert "The export's index config is invalid: embedding.dimensions:" in config.stderr
    assert "pydantic" not in config.stderr
    with VectorStore.open(Settings(data_dir=tmp_path / "b")) as nothing:
        assert nothing.list_indexes() == []  # neither left an index behind

    assert docingest("import", "-", stdin=whole).returncode == 0  # standard input, read twice
    again = docingest("import", str(tmp_path / "docs.jsonl"))
    assert again.returncode == 1
    assert (
        "index_conflict: Index 'docs' already exists" in again.stderr and "--merge" in again.stderr
    )
    merged = docingest("import", str(tmp_path / "docs.jsonl"), "--merge")
    assert merged.returncode == 0, merged.stderr
    with VectorStore.open(Settings(data_dir=tmp_path / "b")) as moved:
        assert moved.count_points("docs") == 3  # the same points, written again
