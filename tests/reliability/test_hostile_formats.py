"""Hostile decks, workbooks, e-books and e-mails through one real `docingest serve` (issue 16).

The same deployment and limits as `test_hostile_inputs` (`hostile_service.LIMITS`): each input
gets its exact outcome, and after each the worker completes a small good job while the server
process stays up.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import hostile_formats
from tests.support.hostile_service import (
    MAX_JOB_CPU_SECONDS,
    Deployment,
    assert_failed,
    assert_still_serving,
    deployed,
    run_job,
    search_texts,
)
from tests.support.proc import CpuMeter


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deployed(tmp_path_factory.mktemp("hostile-formats") / "data") as running:
        yield running


def test_zip_bomb_inside_a_pptx_is_refused_from_the_directory(deployment: Deployment) -> None:
    data = hostile_formats.pptx_zip_bomb()
    assert len(data) < 3_000_000

    with CpuMeter(deployment.process.popen.pid) as cpu:
        job = run_job(deployment, "pptx-zip-bomb", data, "bomb.pptx")

    assert_failed(job, "document_too_large", r"The PPTX declares 2,147,\d{3},\d{3} bytes")
    assert cpu.seconds < MAX_JOB_CPU_SECONDS, cpu.seconds
    assert_still_serving(deployment)


def test_pptx_member_that_lies_about_its_size_is_cut_at_the_declared_size(
    deployment: Deployment,
) -> None:
    job = run_job(
        deployment, "pptx-zip-bomb-lying-sizes", hostile_formats.pptx_zip_bomb(declared_mib=1),
        "liar.pptx",
    )  # fmt: skip

    assert job["status"] == "completed", job
    assert job["result"]["format"] == "pptx"
    texts = search_texts(deployment, "upper box", "pptx-zip-bomb-lying-sizes")
    assert any("Read first: the upper box." in text for text in texts), texts
    assert_still_serving(deployment)


def test_xlsx_declaring_every_cell_reads_only_the_cells_it_holds(deployment: Deployment) -> None:
    data = hostile_formats.xlsx_declaring_the_full_grid("quokka")

    with CpuMeter(deployment.process.popen.pid) as cpu:
        job = run_job(deployment, "xlsx-full-grid", data, "grid.xlsx")

    assert job["status"] == "completed", job
    assert job["result"]["chunks"] == 1
    assert cpu.seconds < MAX_JOB_CPU_SECONDS, cpu.seconds
    assert search_texts(deployment, "quokka", "xlsx-full-grid") == [
        "Grid\n\nItem: first; Note: the row that mentions quokka\nXFD: the far corner"
    ]
    assert_still_serving(deployment)


def test_epub_whose_spine_loops_reads_each_chapter_once(deployment: Deployment) -> None:
    job = run_job(
        deployment, "epub-looping-spine", hostile_formats.epub_with_looping_spine(), "loop.epub"
    )

    assert job["status"] == "completed", job
    assert job["result"]["chunks"] == 3  # one per section, not 10,000 copies of each
    texts = search_texts(deployment, "mountains", "epub-looping-spine")
    assert texts == ["The First Chapter\n\nThe first chapter opens in the mountains."]
    assert_still_serving(deployment)


def test_email_nested_100_deep_is_read_to_the_attachment_depth(deployment: Deployment) -> None:
    data = hostile_formats.email_nested(100)

    with CpuMeter(deployment.process.popen.pid) as cpu:
        job = run_job(deployment, "eml-nested-100", data, "deep.eml")

    assert job["status"] == "completed", job
    assert cpu.seconds < MAX_JOB_CPU_SECONDS, cpu.seconds
    found = " ".join(search_texts(deployment, "body level", "eml-nested-100"))
    assert "Body of level 100." in found and "Body of level 97." in found  # depth 3 (default)
    assert search_texts(deployment, "innermost", "eml-nested-100") == []
    assert_still_serving(deployment)
