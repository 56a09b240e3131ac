"""`docingest inspect` on the new formats: format, metadata, extra and chunks per file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from docingest.cli import main
from tests.support.paths import CORPUS_DIR


def test_json_shows_each_format_with_its_extra_facts(capsys: pytest.CaptureFixture[str]) -> None:
    files = [
        CORPUS_DIR / "eml/fake-email-attachment.eml",
        CORPUS_DIR / "xlsx/stanley-cups.xlsx",
        CORPUS_DIR / "pptx/simple.pptx",
        CORPUS_DIR / "csv/table-semicolon-delimiter.csv",
        CORPUS_DIR / "odt/fake.odt",
        CORPUS_DIR / "epub/winter-sports.epub",
    ]
    assert main(["inspect", "--json", *map(str, files)]) == 0
    outputs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_format = {output["format"]: output for output in outputs}
    assert set(by_format) == {"eml", "xlsx", "pptx", "csv", "odt", "epub"}
    email = by_format["eml"]
    assert email["metadata"]["title"] == "Fake email with attachment"
    assert email["extra"]["attachments"] == ["fake-attachment.txt"]
    assert email["chunks"][-1]["headings"] == ["fake-attachment.txt"]
    assert by_format["csv"]["extra"]["delimiter"] == "semicolon"
    assert by_format["pptx"]["metadata"]["pages"] == 2
    assert by_format["pptx"]["chunks"][1]["page_start"] == 2
    assert [c["headings"] for c in by_format["xlsx"]["chunks"]] == [
        ["Stanley Cups"],
        ["Stanley Cups Since 67"],
    ]


def test_human_output_lists_the_extra_facts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    encrypted = tmp_path / "secret.eml"
    encrypted.write_bytes((CORPUS_DIR / "eml/fake-encrypted.eml").read_bytes())
    status = main(["inspect", str(CORPUS_DIR / "eml/fake-email.eml"), str(encrypted)])
    output = capsys.readouterr().out
    assert status == 1  # the encrypted message failed
    assert "[eml, " in output
    assert "   to: NotMatthew <NotMatthew@notunstructured.com>" in output
    assert "secret.eml  FAILED encrypted_document" in output


def test_inspect_shows_a_pdfs_headings_with_levels_and_its_tables(
    capsys: pytest.CaptureFixture[str],
) -> None:
    paper = CORPUS_DIR / "pdf/dpr-karpukhin2020-2col.pdf"  # no outline: typography
    report = CORPUS_DIR / "pdf/warn-report-excel2013.pdf"  # Excel's tagged tables
    assert main(["inspect", "--json", str(paper), str(report)]) == 0
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    headings = {(h["text"], h["level"]) for h in first["structure"]["headings"]}
    assert {("3 Dense Passage Retriever (DPR)", 1), ("3.1 Overview", 2)} <= headings
    assert any(chunk["headings"][-1:] == ["3.1 Overview"] for chunk in first["chunks"])
    tables = second["structure"]["tables"]
    assert tables and all(table["rows"] > 1 for table in tables)
    assert main(["inspect", str(paper)]) == 0
    output = capsys.readouterr().out
    assert "   H2   3.1 Overview (p2)" in output
