"""Moving an index between engines: `docingest export` from the embedded store, `docingest
import` into another store (qdrant-client standing in for a server), nothing re-embedded."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.settings import Settings
from pipeline.sparse import encode_query
from pipeline.store import VectorStore
from tests.pipeline.store.test_store import CONFIG, records, stored, unit_vector

REPO = Path(__file__).resolve().parents[3]


def filled(store: VectorStore) -> None:
    store.create_index("docs", CONFIG)
    stored(store, "docs", "d1", 1, ["alpha harbour", "beta lighthouse"])
    stored(store, "docs", "d2", 1, ["gamma harbour"])
    store.write_chunks("docs", records("d3", 1, ["staged only"]))  # never published


def test_export_then_import_gives_the_same_index_and_results(tmp_path: Path) -> None:
    from pipeline.store.transfer import export_index, import_index

    out = io.StringIO()
    with VectorStore.open(Settings(data_dir=tmp_path / "edge")) as source:
        filled(source)
        assert export_index(source, "docs", out) == 3  # live points only
        expected_sparse = source.query_sparse("docs", encode_query("harbour"), limit=5)
        expected_dense = source.query_dense("docs", unit_vector("gamma harbour"), limit=5)
    with VectorStore.open(Settings(qdrant_url=":memory:", data_dir=tmp_path)) as target:
        name, count = import_index(target, io.StringIO(out.getvalue()), index="moved")
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


def test_a_file_that_is_no_export_is_refused(tmp_path: Path) -> None:
    from pipeline.store.transfer import import_index

    with VectorStore.open(Settings(qdrant_url=":memory:", data_dir=tmp_path)) as target:
        with pytest.raises(ValueError, match="not a docingest-index-export"):
            import_index(target, io.StringIO('{"hello": 1}\n'))
        assert target.list_indexes() == []


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
