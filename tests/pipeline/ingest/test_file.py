"""`ingest_file`, the one sequence both the job runner and `Pipeline` run: real Redis, Qdrant
in memory, the fake embedding server over HTTP, real parsing in the limited child."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from docingest.pipeline.errors import Cancelled
from docingest.pipeline.indexing import IndexHooks
from docingest.pipeline.ingest.file import IngestHooks, IngestRequest, ingest_file, window_chunks
from docingest.pipeline.keys import JobStage
from docingest.pipeline.services import Services

INDEX = "notes"
DOC = "notes.txt"


def notes(tmp_path: Path, paragraphs: int = 12) -> Path:
    path = tmp_path / DOC
    path.write_text(
        "\n\n".join(
            f"Entry {n} of the notes, with words of its own: n{n}." for n in range(paragraphs)
        )
    )
    return path


def stage_count(stage: JobStage) -> float:
    value = REGISTRY.get_sample_value(
        "docingest_stage_duration_seconds_count", {"stage": stage.value}
    )
    return value or 0.0


def test_a_file_is_ingested_into_a_new_index_with_its_stages_heard_and_timed(
    tmp_path: Path, services: Services
) -> None:
    before = {stage: stage_count(stage) for stage in JobStage}
    heard: list[JobStage] = []
    request = IngestRequest(notes(tmp_path), index=INDEX, document_id=DOC, filename=DOC)
    result = ingest_file(services, request, IngestHooks(on_stage=heard.append))
    assert heard == [JobStage.DETECTING, JobStage.EXTRACTING, JobStage.CHUNKING]
    assert result.chunks > 1 and result.version == 1 and not result.unchanged
    assert services.store.count_points(INDEX, DOC, state="live") == result.chunks
    # Every stage recorded once for the run, by the one stage clock.
    assert {stage: stage_count(stage) - before[stage] for stage in JobStage} == dict.fromkeys(
        JobStage, 1.0
    )
    again = ingest_file(services, request)
    assert again.unchanged and again.version == 1  # the live version, kept


def test_the_version_hook_decides_the_version_written(tmp_path: Path, services: Services) -> None:
    request = IngestRequest(notes(tmp_path), index=INDEX, document_id=DOC, filename=DOC)
    result = ingest_file(services, request, IngestHooks(version=lambda: 7))
    assert result.version == 7
    assert services.store.live_document(INDEX, DOC).version == 7  # type: ignore[union-attr]


def test_a_cancel_seen_once_the_file_is_open_stores_nothing(
    tmp_path: Path, services: Services
) -> None:
    request = IngestRequest(notes(tmp_path), index=INDEX, document_id=DOC, filename=DOC)
    hooks = IngestHooks(index=IndexHooks(should_cancel=lambda: True))
    with pytest.raises(Cancelled):
        ingest_file(services, request, hooks)
    assert services.store.count_points(INDEX, DOC) == 0


def test_a_window_is_one_round_of_the_embedders_concurrent_requests(services: Services) -> None:
    settings = services.settings
    embedder = services.embedder_for(services.default_index_config().embedding)
    assert window_chunks(settings, embedder) == min(
        settings.indexing_window_chunks, embedder.max_batch * settings.embedding_concurrency
    )
    few = settings.model_copy(update={"indexing_window_chunks": 3})
    assert window_chunks(few, embedder) == 3
