"""ODT extraction on the corpus's documents, plus small packages written by the test."""

from __future__ import annotations

import io
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from docingest.pipeline.detect import detect
from docingest.pipeline.document import Block, BlockKind, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import CorruptDocument
from docingest.pipeline.extract import zip_limits
from docingest.pipeline.extract.odt import extract_odt
from docingest.pipeline.settings import Settings

LIMITS = zip_limits(Settings())
NAMESPACES = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/"'
)


def build_odt(body: str, *, meta: str = "", styles: str = "", prolog: str = "") -> bytes:
    """An ODT package: the stored mimetype first, then content.xml (and meta.xml if given)."""
    content = (
        f"{prolog}<office:document-content {NAMESPACES}><office:automatic-styles>{styles}"
        f"</office:automatic-styles><office:body><office:text>{body}</office:text>"
        "</office:body></office:document-content>"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text", zipfile.ZIP_STORED)
        archive.writestr("content.xml", content)
        if meta:
            archive.writestr(
                "meta.xml",
                f"<office:document-meta {NAMESPACES}><office:meta>{meta}</office:meta>"
                "</office:document-meta>",
            )
    return buffer.getvalue()


def extract(data: bytes) -> ExtractedDocument:
    return extract_odt(data, limits=LIMITS)


def test_libreoffice_table_becomes_rows(corpus_dir: Path) -> None:
    document = extract((corpus_dir / "odt/fake.odt").read_bytes())
    assert document.blocks == [
        Block("Lorem ipsum dolor sit amet."),
        Block(
            "Header row | Mon | Wed | Fri\nColor | Blue | Red | Green\nTime | 1pm | 2pm | 3pm\n"
            "Leader | Sarah | Mark | Ryan",
            BlockKind.TABLE,
        ),
    ]


def test_libreoffice_heading_and_list(corpus_dir: Path) -> None:
    document = extract((corpus_dir / "odt/simple.odt").read_bytes())
    assert document.blocks[0] == Block(
        "These are a few of my favorite things:", BlockKind.HEADING, 1
    )
    assert Block("- Hockey", BlockKind.LIST) in document.blocks
    assert Block("This is my first thought. This is my second thought.") in document.blocks


def test_structure_inline_markup_and_metadata() -> None:
    body = (
        '<text:p text:style-name="P1">The Report</text:p>'
        "<text:table-of-content><text:index-body><text:p>Scope ... 1</text:p>"
        "</text:index-body></text:table-of-content>"
        '<text:h text:outline-level="2">Scope</text:h>'
        '<text:p>Two<text:s text:c="3"/>spaces, a <text:span>span</text:span>'
        "<text:note><text:note-body><text:p>footnote</text:p></text:note-body></text:note>"
        "<text:line-break/>and a new line.</text:p>"
        "<text:list><text:list-item><text:p>First</text:p>"
        "<text:list><text:list-item><text:p>Nested</text:p></text:list-item></text:list>"
        "</text:list-item><text:list-item><text:p>Second</text:p></text:list-item></text:list>"
        "<table:table><table:table-row><table:table-cell><text:p>A</text:p></table:table-cell>"
        "<table:covered-table-cell/><table:table-cell><text:p>B</text:p></table:table-cell>"
        "</table:table-row></table:table>"
        "<text:p>Anchor<draw:frame><draw:text-box><text:p>In a box</text:p>"
        "</draw:text-box></draw:frame></text:p>"
    )
    styles = '<style:style style:name="P1" style:parent-style-name="Title"/>'
    meta = (
        "<meta:initial-creator>Ada Lovelace</meta:initial-creator>"
        "<meta:creation-date>2023-05-04T17:47:22</meta:creation-date>"
        "<dc:date>2023-09-13T14:02:34.367419807</dc:date><dc:language>en-GB</dc:language>"
    )
    data = build_odt(body, meta=meta, styles=styles)
    assert detect(data, filename="report.zip").format is DocumentFormat.ODT
    document = extract(data)
    assert document.blocks == [
        Block("The Report", BlockKind.HEADING, 1),
        Block("Scope", BlockKind.HEADING, 2),
        Block("Two spaces, a span\nand a new line."),
        Block("- First\n  - Nested\n- Second", BlockKind.LIST),
        Block("A | B", BlockKind.TABLE),
        Block("Anchor"),
        Block("In a box"),
    ]
    assert document.title == "The Report"  # from the Title style: the metadata has none
    assert document.author == "Ada Lovelace"
    assert document.created == datetime(2023, 5, 4, 17, 47, 22, tzinfo=UTC)
    assert document.modified == datetime(2023, 9, 13, 14, 2, 34, 367419, tzinfo=UTC)
    assert document.extra == {"language": "en-GB"}


def test_deep_nesting_is_corrupt_not_a_crash() -> None:
    body = "<text:p>" + "<text:span>" * 5000 + "deep" + "</text:span>" * 5000 + "</text:p>"
    with pytest.raises(CorruptDocument, match="malformed"):
        extract(build_odt(body))


def test_doctype_and_missing_content_are_refused() -> None:
    with pytest.raises(CorruptDocument, match="DOCTYPE"):
        extract(build_odt("<text:p>x</text:p>", prolog='<!DOCTYPE x [<!ENTITY e "boom">]>'))
    partless = io.BytesIO()
    with zipfile.ZipFile(partless, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text")
    with pytest.raises(CorruptDocument, match="no content.xml"):
        extract(partless.getvalue())
