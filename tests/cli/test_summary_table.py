"""The ingest command's closing table, rendered as the terminal shows it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from docingest.batch import Item
from docingest.commands import summary_table
from docingest.models import Job


def rendered(items: list[Item], *, waited: bool = True) -> list[list[str]]:
    """The table's lines as cells (the box-drawing separators left out)."""
    console = Console(width=200, record=True, color_system=None)
    console.print(summary_table(items, waited=waited))
    lines = console.export_text().splitlines()
    return [[cell for cell in line.split() if cell not in "┃│━─╇┼"] for line in lines]


def job(result: dict[str, Any] | None, status: str = "completed") -> Job:
    """A finished job as `GET /v1/jobs/{id}` shows it, with `result`."""
    return Job.model_validate(
        {
            "job_id": "1" * 32,
            "index": "docs",
            "document_id": "a.txt",
            "filename": "a.txt",
            "status": status,
            "progress": 1.0,
            "created_at": "2026-01-01T00:00:00Z",
            "result": result,
        }
    )


def test_each_file_shows_the_tokens_its_embedding_used() -> None:
    done = Item(Path("a.txt"), "a.txt", job_id="1")
    done.job = job({"chunks": 12, "pages": None, "usage": {"input_tokens": 3456}})
    older = Item(Path("b.txt"), "b.txt", job_id="2")
    older.job = job({"chunks": 3, "pages": 1})  # a result from before usage existed
    header, _, first, second = rendered([done, older])
    assert header[:5] == ["document", "status", "chunks", "pages", "tokens"]
    assert first[:5] == ["a.txt", "completed", "12", "-", "3456"]
    assert second[:5] == ["b.txt", "completed", "3", "1", "-"]


def test_without_waiting_there_is_no_tokens_column() -> None:
    queued = Item(Path("a.txt"), "a.txt", job_id="1")
    assert "tokens" not in rendered([queued], waited=False)[0]


def test_a_file_is_named_by_the_document_id_the_service_stored() -> None:
    stored = Item(Path("csv/stanley-cups.csv"), "csv/stanley-cups.csv", job_id="1")
    stored.document_id = "stanley-cups.csv"  # as the upload's answer says
    refused = Item(Path("csv/broken.csv"), "csv/broken.csv")  # no upload accepted: its path
    _, _, first, second = rendered([stored, refused], waited=False)
    assert first[0] == "stanley-cups.csv" and second[0] == "csv/broken.csv"
