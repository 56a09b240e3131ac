"""What the client commands print, in process: the result table's labels and width, and the
progress line of a job while it embeds (the job as `GET /v1/jobs/{id}` shows it)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from docingest import batch
from docingest.batch import Item
from docingest.commands import job_text, show, summary_table
from docingest.models import Job


def job(**fields: Any) -> Job:
    """A processing job with the API's fields, `fields` replacing some."""
    base: dict[str, Any] = {
        "job_id": "0" * 32,
        "index": "docs",
        "document_id": "report.pdf",
        "filename": "report.pdf",
        "status": "processing",
        "stage": "embedding",
        "progress": 0.4,
        "pages_total": None,
        "pages_done": 0,
        "chunks_total": 77,
        "chunks_done": 0,
        "chunks_embedded": 30,
        "created_at": "2026-01-01T00:00:00Z",
        "started_at": None,
        "finished_at": None,
        "heartbeat_at": None,
        "attempts": 1,
        "result": None,
        "error": None,
    }
    return Job.model_validate({**base, **fields})


def test_files_found_in_a_folder_are_labelled_relative_to_it(tmp_path: Path) -> None:
    deep = tmp_path / "home" / "someone" / "Documents"
    (deep / "notes").mkdir(parents=True)
    (deep / "notes" / "plan.md").write_text("# Plan\n")
    (deep / "todo.txt").write_text("todo\n")
    single = deep / "todo.txt"
    assert [item.label for item in batch.collect([deep.resolve()])] == ["notes/plan.md", "todo.txt"]
    assert [item.label for item in batch.collect([single])] == [str(single)]  # as given
    other = tmp_path / "Other"
    other.mkdir()
    (other / "todo.txt").write_text("other\n")
    labels = [item.label for item in batch.collect([deep, other])]
    assert labels == ["Documents/notes/plan.md", "Documents/todo.txt", "Other/todo.txt"]


def test_the_result_table_fits_80_columns() -> None:
    long_path = "/srv/" + "/".join(["a-rather-long-folder-name"] * 4) + "/quarterly-report.pdf"
    failed = Item(Path(long_path), long_path, job_id="1" * 32)
    failed.job = job(
        status="failed",
        stage=None,
        error={"code": "corrupt_document", "message": "The PDF is damaged: " + "x " * 60},
    )
    done = Item(Path("notes.txt"), "notes.txt", job_id="2" * 32)
    done.job = job(status="completed", stage=None, result={"chunks": 3, "pages": None})
    out = io.StringIO()
    terminal = Console(file=out, width=80, force_terminal=True, color_system=None)
    show(terminal, summary_table([failed, done]))
    lines = out.getvalue().splitlines()
    assert lines and max(len(line) for line in lines) <= 80, "\n".join(lines)
    first_column = "".join(line.split("│")[0].strip() for line in lines if "│" in line)
    assert long_path in first_column  # folded, not cut


def test_progress_shows_the_chunks_embedded_while_embedding() -> None:
    """It showed chunks_done, which stays 0 until the window is stored ("0 of 77" for 35 s)."""
    item = Item(Path("report.pdf"), "report.pdf", job_id="0" * 32)
    item.job = job()
    assert item.counts == "30 of 77 chunks"
    item.job = job(stage="storing", chunks_embedded=77, chunks_done=40)
    assert item.counts == "40 of 77 chunks"
    item.job = job(stage="extracting", pages_total=400, pages_done=12, chunks_total=None)
    assert item.counts == "page 12 of 400, 30 chunks embedded"
    item.job = job(stage="embedding", chunks_total=None)
    assert item.counts == "30 of ? chunks"
    assert "30/77 embedded, 0 stored" in job_text(job()).plain


def test_a_name_that_lied_about_the_format_is_noted_in_the_table() -> None:
    item = Item(Path("minutes.pdf"), "minutes.pdf", job_id="3" * 32)
    note = "The file is named .pdf but holds plain text; it was read as txt."
    item.job = job(status="completed", stage=None, result={"chunks": 1, "format_note": note})
    out = io.StringIO()
    show(Console(file=out, width=200, color_system=None), summary_table([item]))
    assert note in out.getvalue()
