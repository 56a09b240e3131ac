from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from docingest.pipeline.detect import detect
from docingest.pipeline.document import Block, BlockKind, DocumentFormat, ExtractedDocument
from docingest.pipeline.extract.markdown import extract_markdown
from tests.support.paths import CORPUS_DIR

MARKDOWN_FILES = sorted(path.name for path in (CORPUS_DIR / "markdown").iterdir())


def _extract(corpus_dir: Path, name: str) -> ExtractedDocument:
    data = (corpus_dir / "markdown" / name).read_bytes()
    return extract_markdown(data, encoding=detect(data, filename=name).encoding)


def _of_kind(document: ExtractedDocument, kind: BlockKind) -> list[str]:
    return [block.text for block in document.blocks if block.kind is kind]


@pytest.mark.parametrize("name", MARKDOWN_FILES)
def test_every_corpus_file_yields_clean_blocks(corpus_dir: Path, name: str) -> None:
    document = _extract(corpus_dir, name)
    assert document.format is DocumentFormat.MARKDOWN
    assert document.blocks
    for block in document.blocks:
        assert block.text.strip(), "no empty blocks"
        assert "XDOCINGEST" not in block.text, "every placeholder is put back"
        assert block.level == 0 or (block.kind is BlockKind.HEADING and 1 <= block.level <= 6)
        if block.kind in (BlockKind.HEADING, BlockKind.PARAGRAPH):
            lines = block.text.split("\n")
            assert all(line == line.strip() and "  " not in line for line in lines), block.text
    json.dumps(document.extra)  # metadata must be JSON-serialisable


def test_front_matter_title_and_the_rest_as_metadata(corpus_dir: Path) -> None:
    haystack = _extract(corpus_dir, "haystack-converters_api.md")
    assert haystack.title == "Converters"
    assert haystack.extra["front_matter"] == {
        "id": "converters-api",
        "description": "Various converters to transform data from one format to another.",
        "slug": "/converters-api",
    }
    assert not any("converters-api" in block.text for block in haystack.blocks)
    logfire = _extract(corpus_dir, "logfire-sql-reference.md")
    assert logfire.title == "Pydantic Logfire SQL Reference"
    assert logfire.blocks[0] == Block("SQL", BlockKind.HEADING, level=1)


def test_front_matter_flow_mapping(corpus_dir: Path) -> None:
    document = _extract(corpus_dir, "ragflow-release_notes.md")
    assert document.extra["front_matter"] == {
        "sidebar_position": 1,
        "slug": "/release_notes",
        "sidebar_custom_props": {"sidebarIcon": "LucideClipboardPenLine"},
    }
    assert document.blocks[0] == Block("Releases", BlockKind.HEADING, level=1)
    assert document.title == "Releases"  # no title in front matter: the first h1


def test_front_matter_values_are_made_json_safe() -> None:
    source = (
        "---\ntitle: Notes\nauthor:\n  - name: Ana Lima\n  - Bo Chen\ndate: 2024-03-01\n"
        "tags: [a, b]\nblob: !!binary aGVsbG8=\n---\n# Heading\n\nBody text.\n"
    )
    document = extract_markdown(source.encode(), encoding="utf-8")
    assert document.title == "Notes"
    assert document.author == "Ana Lima, Bo Chen"
    assert document.extra["front_matter"] == {"date": "2024-03-01", "tags": ["a", "b"]}
    assert _of_kind(document, BlockKind.PARAGRAPH) == ["Body text."]


def test_invalid_front_matter_is_kept_out_of_the_text() -> None:
    source = b"---\ntitle: [unclosed\n---\n# Body\n"
    document = extract_markdown(source, encoding="utf-8")
    assert document.blocks == [Block("Body", BlockKind.HEADING, level=1)]
    assert "front_matter" not in document.extra
    assert document.title == "Body"


def test_headings_carry_their_levels(corpus_dir: Path) -> None:
    headings = [
        (block.text, block.level)
        for block in _extract(corpus_dir, "httpx-CHANGELOG.md").blocks
        if block.kind is BlockKind.HEADING
    ]
    assert headings[:6] == [
        ("Changelog", 1),
        ("[UNRELEASED]", 2),
        ("Removed", 3),
        ("Added", 3),
        ("0.28.1 (6th December, 2024)", 2),
        ("0.28.0 (28th November, 2024)", 2),
    ]
    assert len(headings) == 197  # as markdown-it counts them (SOURCES.md)


def test_code_fences_are_kept_verbatim(corpus_dir: Path) -> None:
    # Every fence in this README starts at column 0, so a plain regex finds them all.
    source = (corpus_dir / "markdown/openai-python-README.md").read_text(encoding="utf-8")
    fences = re.findall(r"^```[\w-]*\n(.*?)\n```$", source, flags=re.M | re.S)
    assert len(fences) == 48
    code = _of_kind(_extract(corpus_dir, "openai-python-README.md"), BlockKind.CODE)
    assert code == fences
    assert "from openai import OpenAI\n\nclient = OpenAI(\n" in code[1]


def test_code_keeps_tabs(corpus_dir: Path) -> None:
    code = _of_kind(_extract(corpus_dir, "ragflow-http_api_reference.md"), BlockKind.CODE)
    memory = '{\n\t"code": 0,\n\t"data": {\n\t...your new memory here\n\t},\n\t"message": true\n}'
    assert memory in code
    assert len(code) == 310  # as markdown-it counts them (SOURCES.md)


def test_fence_inside_a_quote_inside_a_list_is_code(corpus_dir: Path) -> None:
    document = _extract(corpus_dir, "ragflow-README.md")
    code = _of_kind(document, BlockKind.CODE)
    assert "# In this case, we set it to 262144:\nsudo sysctl -w vm.max_map_count=262144" in code
    assert not any("In this case" in text for text in _of_kind(document, BlockKind.HEADING))
    assert len(code) == 22


def test_table_cells(corpus_dir: Path) -> None:
    tables = _of_kind(_extract(corpus_dir, "pdfplumber-README.md"), BlockKind.TABLE)
    rows = [row for table in tables for row in table.split("\n")]
    assert ".pages | A list containing one pdfplumber.Page instance per page loaded." in rows
    assert "Property | Description" in rows


def test_nested_lists_keep_their_nesting(corpus_dir: Path) -> None:
    lists = _of_kind(_extract(corpus_dir, "ragflow-release_notes.md"), BlockKind.LIST)
    assert any(
        "- Chat channels:\n  - Integrates WhatsApp via a QR code scan. #16238\n"
        "  - Integrates DingTalk via bot API credentials. #16183" in text
        for text in lists
    )


def test_html_blocks_in_a_readme_keep_their_text(corpus_dir: Path) -> None:
    document = _extract(corpus_dir, "ragflow-README.md")
    paragraphs = _of_kind(document, BlockKind.PARAGRAPH)
    assert "📕 Table of Contents" in paragraphs  # <details><summary>
    # The Markdown list after <details> is rendered, not left as raw syntax.
    toc = _of_kind(document, BlockKind.LIST)[0]
    assert toc.startswith("- 💡 What is RAGFlow?\n- 🎮 Get Started\n")


def test_non_latin_text(corpus_dir: Path) -> None:
    japanese = _extract(corpus_dir, "kotaemon-insurance-policy-ja.md")
    assert japanese.title == "5 年ごと配当付特定状態保障定期保険特約条項 目次"
    table_rows = "\n".join(_of_kind(japanese, BlockKind.TABLE)).split("\n")
    assert (
        "特約死亡保険金 | 被保険者がこの特約の保険期間中に死亡したときに支払います。" in table_rows
    )
    arabic = _extract(corpus_dir, "ragflow-README_ar.md")
    assert Block("💡 ما هو RAGFlow؟", BlockKind.HEADING, level=2) in arabic.blocks
    assert Block("🎉 تابعونا", BlockKind.HEADING, level=2) in arabic.blocks


def test_latin1_markdown_decodes_to_umlauts(corpus_dir: Path) -> None:
    document = _extract(corpus_dir, "umlauts-non-utf8.md")
    assert document.blocks == [
        Block("können", BlockKind.HEADING, level=2),
        Block("können", BlockKind.PARAGRAPH),
        Block("äöüß", BlockKind.PARAGRAPH),
    ]


def test_mdx_imports_and_components_are_not_text(corpus_dir: Path) -> None:
    document = _extract(corpus_dir, "khoj-setup.mdx")
    text = "\n".join(block.text for block in document.blocks)
    assert "import Tabs" not in text and "TabItem" not in text
    assert Block("Prerequisites", BlockKind.HEADING, level=3) in document.blocks
    code = _of_kind(document, BlockKind.CODE)
    assert "brew install --cask docker\nbrew install docker-compose" in code
    # Prose nested in <TabItem> is prose, not indented code.
    assert not any("Option 1" in block for block in code)
    lists = _of_kind(document, BlockKind.LIST)
    assert any(
        item.startswith("- Option 1: Click here to install Docker Desktop.") for item in lists
    )


def test_admonitions_and_myst_markup(corpus_dir: Path) -> None:
    logfire = _extract(corpus_dir, "logfire-sql-reference.md")
    assert (
        "Prefer this column over created_at, which is an internal timestamp representing when "
        "the record was created in the database."
    ) in _of_kind(logfire, BlockKind.PARAGRAPH)  # MkDocs `!!! warning` body, not code
    cookbook = _extract(corpus_dir, "ocrmypdf-cookbook.md")
    text = "\n".join(block.text for block in cookbook.blocks)
    assert "SPDX" not in text  # `%` comments
    assert ":::" not in text
    assert any(
        p.startswith("The sidecar file contains the OCR text found by OCRmyPDF.")
        for p in _of_kind(cookbook, BlockKind.PARAGRAPH)
    )
    assert 'If the page is "just a little off horizontal"' in text  # \" escapes
    llm = _extract(corpus_dir, "llm-usage.md")
    assert "(usage)=" not in "\n".join(block.text for block in llm.blocks)
    assert llm.blocks[0] == Block("Usage", BlockKind.HEADING, level=1)
