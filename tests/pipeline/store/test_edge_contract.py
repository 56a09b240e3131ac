"""What docingest relies on in qdrant-edge-py, checked against the pinned release.

Edge is beta and its API drifts between releases: an upgrade that changes any of this fails
here, loudly, before it changes the store's behaviour. The store's own suite
(test_store.py, test_search.py) runs on Edge as well; these are the engine's promises beneath it.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any, cast

import qdrant_edge as edge

REPO = Path(__file__).resolve().parents[3]
PINNED = "0.9.0"


def shard(path: Path, *, dims: int = 2) -> edge.EdgeShard:
    return edge.EdgeShard.create(
        str(path),
        edge.EdgeConfig(
            vectors={"dense": edge.EdgeVectorParams(size=dims, distance=edge.Distance.Cosine)},
            sparse_vectors={"keyword": edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf)},
        ),
    )


def count(target: edge.EdgeShard, condition: edge.FieldCondition) -> int:
    return target.count(edge.CountRequest(exact=True, filter=edge.Filter(must=[condition])))


def test_the_installed_release_is_the_pinned_one() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    service = pyproject["project"]["optional-dependencies"]["service"]
    pins = [d for d in service if d.startswith("qdrant-edge-py")]
    assert pins == [f"qdrant-edge-py=={PINNED}"]
    assert version("qdrant-edge-py") == PINNED


def test_boolean_payloads_cannot_be_matched(tmp_path: Path) -> None:
    """The reason for `edge_convert.BOOL_KEYS`: MatchValue(True) is taken as the integer 1.

    When this fails, Edge matches booleans: drop the 0/1 workaround in edge_convert."""
    target = shard(tmp_path / "s")
    target.update(
        edge.UpdateOperation.upsert_points(
            [
                edge.Point(id=1, vector={"dense": [1.0, 0.0]}, payload={"flag": True}),
                edge.Point(id=2, vector={"dense": [1.0, 0.0]}, payload={"flag": 1}),
            ]
        )
    )
    assert count(target, edge.FieldCondition(key="flag", match=edge.MatchValue(True))) == 1
    assert count(target, edge.FieldCondition(key="flag", match=edge.MatchValue(1))) == 1
    matched = target.query(
        edge.QueryRequest(
            limit=5,
            query=edge.Query.Nearest([1.0, 0.0], using="dense"),
            filter=edge.Filter(must=[edge.FieldCondition(key="flag", match=edge.MatchValue(True))]),
        )
    )
    assert [point.id for point in matched] == [2]  # the integer, not the boolean
    target.close()


def test_idf_modifier_weights_rare_terms_higher(tmp_path: Path) -> None:
    target = shard(tmp_path / "s")
    points = [
        edge.Point(
            id=i,
            vector={
                "dense": [1.0, 0.0],
                # term 7 in every point, term 9 in point 0 only
                "keyword": edge.SparseVector(indices=terms, values=[1.0] * len(terms)),
            },
        )
        for i, terms in enumerate([[7, 9]] + [[7]] * 9)
    ]
    target.update(edge.UpdateOperation.upsert_points(points))

    def score(term: int) -> float:
        hits = target.query(
            edge.QueryRequest(
                limit=1,
                query=edge.Query.Nearest(
                    edge.SparseVector(indices=[term], values=[1.0]), "keyword"
                ),
                filter=edge.Filter(must=[edge.HasIdCondition({0})]),
            )
        )
        return hits[0].score

    assert score(9) > 2 * score(7)
    target.close()


def test_rrf_fusion_is_one_over_k_plus_rank(tmp_path: Path) -> None:
    """`Fusion.Rrf(k)` scores a point 1/(k + position) per prefetch, positions from 0, as the
    server and qdrant-client do (their default k is 2; edge_convert maps the default to it)."""
    target = shard(tmp_path / "s")
    vectors = {1: [1.0, 0.0], 2: [0.8, 0.6], 3: [0.0, 1.0]}
    terms = {1: [5], 2: [5, 6], 3: [6]}
    target.update(
        edge.UpdateOperation.upsert_points(
            [
                edge.Point(
                    id=i,
                    vector={
                        "dense": vectors[i],
                        "keyword": edge.SparseVector(
                            indices=terms[i], values=[1.0] * len(terms[i])
                        ),
                    },
                )
                for i in vectors
            ]
        )
    )
    fused = target.query(
        edge.QueryRequest(
            limit=3,
            prefetches=[
                edge.Prefetch(limit=3, query=edge.Query.Nearest([1.0, 0.0], using="dense")),
                edge.Prefetch(
                    limit=3,
                    query=edge.Query.Nearest(
                        edge.SparseVector(indices=[6], values=[1.0]), "keyword"
                    ),
                ),
            ],
            query=cast(Any, edge.Fusion.Rrf(k=2)),  # the stub omits the nested class
        )
    )
    # dense ranks 1, 2, 3 for ids 1, 2, 3; keyword (term 6) ranks ids 2/3 first, id 1 absent
    got = {point.id: point.score for point in fused}
    assert set(got) == {1, 2, 3}
    assert abs(got[1] - 1 / 2) < 1e-6  # dense position 0 only
    # ids 2 and 3 tie on term 6 (same weight and IDF): either may hold keyword position 0
    assert abs(got[2] - (1 / 3 + 1 / 2)) < 1e-6 or abs(got[2] - (1 / 3 + 1 / 3)) < 1e-6
    assert got[3] > 1 / 4  # dense position 2 plus a keyword position


_WRITE_AND_WAIT = textwrap.dedent(
    """
    import sys, time
    import qdrant_edge as edge
    target = edge.EdgeShard.load(sys.argv[1])
    for start in range(0, 50, 10):
        target.update(edge.UpdateOperation.upsert_points([
            edge.Point(id=i, vector={"dense": [1.0, float(i)]}, payload={"n": i})
            for i in range(start, start + 10)
        ]))
    print("written", flush=True)
    time.sleep(60)
    """
)


def test_updates_survive_a_kill_without_flush(tmp_path: Path) -> None:
    """An `update` that returned is in the WAL: a kill -9 before any flush loses none of it."""
    path = tmp_path / "s"
    shard(path).close()
    with subprocess.Popen(
        [sys.executable, "-c", _WRITE_AND_WAIT, str(path)], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "written"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    reloaded = edge.EdgeShard.load(str(path))
    assert reloaded.count(edge.CountRequest(exact=True)) == 50
    reloaded.close()


def test_a_second_process_cannot_open_an_open_shard(tmp_path: Path) -> None:
    """Edge refuses a second open through its WAL lock, with an opaque message; docingest's
    `ProcessLock` (data_dir/edge/docingest.lock) refuses first and names the holder."""
    path = tmp_path / "s"
    shard(path).close()
    first = edge.EdgeShard.load(str(path))
    probe = subprocess.run(
        [sys.executable, "-c", f"import qdrant_edge as e; e.EdgeShard.load({str(path)!r}).close()"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    first.close()
    assert probe.returncode == 1
    assert re.search(r"failed to open WAL", probe.stderr)
