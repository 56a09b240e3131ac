"""PPTX extraction on the corpus's decks, plus decks written here with python-pptx."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from pptx import Presentation
from pptx.util import Inches

from docingest.pipeline.detect import detect
from docingest.pipeline.document import Block, BlockKind, ExtractedDocument, join_blocks
from docingest.pipeline.errors import CorruptDocument, DocumentTooLarge
from docingest.pipeline.extract import extract as extract_any
from docingest.pipeline.extract import zip_limits
from docingest.pipeline.extract.pptx import extract_pptx
from docingest.pipeline.settings import Settings

LIMITS = zip_limits(Settings())


def extract(data: bytes, *, max_slides: int = 100) -> ExtractedDocument:
    return extract_pptx(data, limits=LIMITS, max_slides=max_slides)


def corpus(corpus_dir: Path, name: str) -> ExtractedDocument:
    return extract((corpus_dir / "pptx" / name).read_bytes())


def test_slides_are_pages_with_their_titles_as_headings(corpus_dir: Path) -> None:
    document = corpus(corpus_dir, "simple.pptx")
    assert document.pages == 2
    assert document.blocks[0] == Block("Title Slide", BlockKind.HEADING, 1, 1)
    assert document.blocks[1] == Block("With a subtitle", page=1)
    assert document.blocks[2] == Block("Things to think about", BlockKind.HEADING, 1, 2)
    assert document.blocks[3].page == 2
    assert document.blocks[3].text.splitlines()[0] == "How much is enough?"
    assert document.author == "Steve Canny"
    assert document.title is None  # PowerPoint's placeholder title, "Title Slide", is no title


def test_bullets_keep_their_levels_and_text_boxes_follow_in_reading_order(
    corpus_dir: Path,
) -> None:
    document = corpus(corpus_dir, "fake-power-point.pptx")
    assert [b.text for b in document.blocks] == [
        "Adding a Bullet Slide",
        "Find the bullet slide layout\n  Use _TextFrame.text for first bullet\n"
        "    Use _TextFrame.add_paragraph() for subsequent bullets\nHere is a lot of text!",
        "Here is some text in a text box!",
    ]


def test_a_table_is_rows_of_cells(corpus_dir: Path) -> None:
    document = corpus(corpus_dir, "fake-power-point-table.pptx")
    assert document.blocks[1] == Block(
        "Column 1 | Column 2 | Column 3\nRed | Green | Blue\nPurple | Orange | Yellow\n"
        "Tangerine | Pink | Aqua",
        BlockKind.TABLE,
        page=1,
    )


def test_title_only_slides_are_still_findable(corpus_dir: Path) -> None:
    document = corpus(corpus_dir, "fake-power-point-many-pages.pptx")
    assert document.blocks == [
        Block("Slide 1", BlockKind.HEADING, 1, 1),
        Block("Page 1", page=1),
        Block("Slide 2", BlockKind.HEADING, 1, 2),
        Block("Page 2", page=2),
    ]


def test_text_inside_nested_groups_is_read(corpus_dir: Path) -> None:
    document = corpus(corpus_dir, "group-shapes-nested.pptx")
    texts = {b.text for b in document.blocks[1:]}
    assert set("ABCDEFGHIJ") <= texts


def test_malformed_deck_gives_what_it_can(corpus_dir: Path) -> None:
    document = corpus(corpus_dir, "fake-power-point-malformed.pptx")
    assert document.blocks[0] == Block("Test Slide", BlockKind.HEADING, 1, 1)


def build_deck() -> bytes:
    """Two slides: text in two boxes placed bottom-first, a table, and speaker notes."""
    deck = Presentation()
    deck.core_properties.title = "Quarterly review"
    deck.core_properties.author = "Ada Lovelace"
    slide = deck.slides.add_slide(deck.slide_layouts[5])  # title only
    slide.shapes.title.text = "Results"
    lower = slide.shapes.add_textbox(Inches(1), Inches(5), Inches(4), Inches(1))
    lower.text_frame.text = "Read second: the lower box."
    upper = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(4), Inches(1))
    upper.text_frame.text = "Read first: the upper box."
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(0.5), Inches(4), Inches(1)).table
    for (row, column), text in {(0, 0): "Region", (0, 1): "Sales", (1, 0): "North"}.items():
        table.cell(row, column).text = text
    slide.notes_slide.notes_text_frame.text = "Mention the northern region first."
    deck.slides.add_slide(deck.slide_layouts[6])  # blank
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def test_text_then_tables_then_notes_per_slide() -> None:
    document = extract(build_deck())
    assert document.pages == 2
    assert document.blocks == [
        Block("Results", BlockKind.HEADING, 1, 1),
        Block("Read first: the upper box.", page=1),
        Block("Read second: the lower box.", page=1),
        Block("Region | Sales\nNorth", BlockKind.TABLE, page=1),
        Block("Notes: Mention the northern region first.", page=1),
    ]  # the blank second slide adds nothing
    assert (document.title, document.author) == ("Quarterly review", "Ada Lovelace")


def test_too_many_slides() -> None:
    with pytest.raises(DocumentTooLarge, match="2 slides, above the limit of 1"):
        extract(build_deck(), max_slides=1)


def test_damaged_packages_are_corrupt() -> None:
    data = build_deck()
    with pytest.raises(CorruptDocument, match="not a readable ZIP"):
        extract(data[: len(data) // 2])
    partless = io.BytesIO()
    with zipfile.ZipFile(partless, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
    with pytest.raises(CorruptDocument, match="no ppt/presentation.xml"):
        extract(partless.getvalue())


def test_the_full_text_holds_every_slide(corpus_dir: Path) -> None:
    text = join_blocks(corpus(corpus_dir, "simple.pptx").blocks)[0]
    assert "Where have all the flowers gone?" in text


def test_progress_follows_the_slides() -> None:
    seen: list[tuple[int, int]] = []
    data = build_deck()
    extract_any(data, detect(data), settings=Settings(), on_page=lambda *p: seen.append(p))
    assert seen == [(1, 2), (2, 2)]
