"""`Services`: deleting a document, with the rule that protects it from a job still storing
it (real Redis, Qdrant in memory, the fake embedding server)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from docingest.pipeline.errors import DocumentNotFound, Superseded
from docingest.pipeline.indexing import IndexHooks
from docingest.pipeline.ingest.file import IngestHooks, IngestRequest, ingest_file
from docingest.pipeline.services import Services

INDEX = "notes"
DOC = "notes.txt"


def request(tmp_path: Path, tag: str) -> IngestRequest:
    path = tmp_path / f"{tag}.txt"
    path.write_text("\n\n".join(f"{tag} entry {n}, a paragraph of its own." for n in range(8)))
    return IngestRequest(path, index=INDEX, document_id=DOC, filename=DOC)


def test_a_deleted_document_is_gone_and_a_second_delete_is_not_found(
    tmp_path: Path, services: Services
) -> None:
    ingest_file(services, request(tmp_path, "alpha"))
    assert services.store.count_points(INDEX, DOC) > 0
    services.delete_document(INDEX, DOC)
    assert services.store.count_points(INDEX, DOC) == 0
    assert services.store.live_document(INDEX, DOC) is None
    with pytest.raises(DocumentNotFound, match=DOC):
        services.delete_document(INDEX, DOC)


def test_a_delete_supersedes_an_ingest_under_way_which_cannot_bring_it_back(
    tmp_path: Path, services: Services
) -> None:
    ingest_file(services, request(tmp_path, "alpha"))
    embedding, deleted = threading.Event(), threading.Event()

    def pause(step: str) -> None:
        if step == "embed":  # announced before the document's store lock is taken
            embedding.set()
            assert deleted.wait(30)

    outcome: list[BaseException] = []

    def run() -> None:
        try:
            ingest_file(
                services, request(tmp_path, "omega"), IngestHooks(index=IndexHooks(on_step=pause))
            )
        except BaseException as exc:  # the outcome is asserted below
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert embedding.wait(30)
    services.delete_document(INDEX, DOC)
    deleted.set()
    worker.join(60)
    assert not worker.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], Superseded)
    assert services.store.count_points(INDEX, DOC) == 0
