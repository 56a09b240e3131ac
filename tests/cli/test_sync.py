"""`docingest sync` as a real command against a real `docingest serve`: unchanged files are not
uploaded at all, changed and new ones are, `--prune` deletes only this sync's documents whose
files are gone, and `--dry-run` changes nothing."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import docingest
from docingest.folder_sync import SYNC_KEY
from docingest.models import Document
from tests.support.docingest_service import (
    DOCINGEST,
    LOADED_START_TIMEOUT,
    ServiceEnv,
    running_serve,
)

INDEX = "sync-docs"


def sync(
    env: ServiceEnv, directory: Path, *extra: str, index: str = INDEX
) -> subprocess.CompletedProcess[str]:
    """Run the real `docingest sync` with DOCINGEST_URL pointing at the module's service."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DOCINGEST_")}
    environ["DOCINGEST_URL"] = env.base_url
    return _run([str(DOCINGEST), "sync", str(directory), "--index", index, *extra], environ)


def _run(argv: Sequence[str], environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def serve_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceEnv]:
    """The module's `docingest serve`, given time to start on a loaded machine."""
    env = ServiceEnv(data_dir=tmp_path_factory.mktemp("sync-serve"))
    with running_serve(env, timeout=LOADED_START_TIMEOUT):
        yield env


@pytest.fixture(scope="module")
def client(serve_env: ServiceEnv) -> Iterator[docingest.Client]:
    with docingest.Client(serve_env.base_url) as client:
        yield client


def uploads(client: docingest.Client, index: str) -> int:
    """How many uploads the index has seen: one job each."""
    return sum(1 for _ in client.iter_jobs(index=index, page_size=500))


def documents(client: docingest.Client, index: str) -> dict[str, Document]:
    return {doc.document_id: doc for doc in client.iter_documents(index)}


def write_folder(root: Path) -> Path:
    (root / "team" / "notes").mkdir(parents=True)
    (root / "team" / "notes" / "plan.md").write_text("# Plan\n\nShip the search feature.\n")
    (root / "team" / "todo.txt").write_text("Review the ingestion dashboards on Monday.\n")
    (root / "team" / "budget.txt").write_text("The quarterly budget review is in March.\n")
    (root / "team" / ".hidden.txt").write_text("not for the index\n")
    return root / "team"


def test_a_second_sync_of_unchanged_files_uploads_nothing(
    serve_env: ServiceEnv, client: docingest.Client, tmp_path: Path
) -> None:
    folder = write_folder(tmp_path)
    first = sync(serve_env, folder, index="sync-again")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "plan: 3 new, 0 changed" in first.stdout
    stored = documents(client, "sync-again")
    assert set(stored) == {"notes/plan.md", "todo.txt", "budget.txt"}
    assert all(doc.metadata[SYNC_KEY] == folder.resolve().as_posix() for doc in stored.values())
    before = uploads(client, "sync-again")
    assert before == 3

    again = sync(serve_env, folder, index="sync-again")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "plan: 0 new, 0 changed, 0 metadata only, 3 unchanged, 0 gone" in again.stdout
    assert uploads(client, "sync-again") == before  # not even an `unchanged` upload


def test_prune_deletes_only_this_syncs_documents_whose_files_are_gone(
    serve_env: ServiceEnv, client: docingest.Client, tmp_path: Path
) -> None:
    folder = write_folder(tmp_path / "a")
    assert sync(serve_env, folder).returncode == 0
    # Another writer's document and another sync's document in the same index.
    client.ingest(INDEX, b"Someone else's memo about the offsite.", document_id="memo.txt")
    other = tmp_path / "b"
    other.mkdir()
    (other / "budget.txt").write_text("The other team's budget review is in May.\n")
    assert sync(serve_env, other, "--source", "other-sync", "--id-prefix", "b/").returncode == 0
    (folder / "budget.txt").unlink()
    (folder / "todo.txt").write_text("Review the dashboards on Tuesday instead.\n")  # changed
    (folder / "new.md").write_text("# New\n\nA note added since the last sync.\n")
    jobs_before = uploads(client, INDEX)
    ids_before = set(documents(client, INDEX))

    dry = sync(serve_env, folder, "--prune", "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "plan: 1 new, 1 changed, 0 metadata only, 1 unchanged, 1 gone" in dry.stdout
    assert "delete (gone)" in dry.stdout and "budget.txt" in dry.stdout
    assert uploads(client, INDEX) == jobs_before and set(documents(client, INDEX)) == ids_before

    kept = sync(serve_env, folder)  # without --prune nothing is deleted
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "budget.txt" in documents(client, INDEX)

    pruned = sync(serve_env, folder, "--prune")
    assert pruned.returncode == 0, pruned.stdout + pruned.stderr
    assert "1 deleted" in pruned.stdout
    after = documents(client, INDEX)
    assert "memo.txt" in after  # not the sync's
    assert "budget.txt" not in after
    assert after["b/budget.txt"].metadata[SYNC_KEY] == "other-sync"  # the other sync's own
    assert "new.md" in after
    todo = client.search(INDEX, "dashboards Tuesday", filter={"document_id": "todo.txt"}).results
    assert todo and "Tuesday" in todo[0].text


def test_changed_metadata_alone_updates_the_documents(
    serve_env: ServiceEnv, client: docingest.Client, tmp_path: Path
) -> None:
    folder = write_folder(tmp_path)
    assert sync(serve_env, folder, "--metadata", '{"team": "a"}', index="sync-meta").returncode == 0
    again = sync(serve_env, folder, "--metadata", '{"team": "b"}', index="sync-meta")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "3 metadata only" in again.stdout
    assert {doc.metadata["team"] for doc in documents(client, "sync-meta").values()} == {"b"}


def test_exit_codes_are_those_of_ingest(serve_env: ServiceEnv, tmp_path: Path) -> None:
    missing = sync(serve_env, tmp_path / "nowhere")
    assert missing.returncode == 2 and "no such folder" in missing.stderr
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.7\n" + os.urandom(4000))
    (tmp_path / "fine.txt").write_text("A short note about the quarterly budget review.\n")
    failed = sync(serve_env, tmp_path, index="sync-broken")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "corrupt_document" in failed.stdout
    assert "1 uploaded" in failed.stdout and "1 failed" in failed.stdout
