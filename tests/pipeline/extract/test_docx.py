"""DOCX extraction on real corpus files, plus hostile packages built in the test."""

from __future__ import annotations

import io
import struct
import time
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import docx
import pytest
from docx.oxml.parser import parse_xml
from lxml import etree

from docingest.pipeline.document import Block, BlockKind, ExtractedDocument, join_blocks
from docingest.pipeline.errors import (
    CorruptDocument,
    DocumentTooLarge,
    EncryptedDocument,
    IngestError,
    UnsupportedFormat,
)
from docingest.pipeline.extract.docx import extract_docx
from docingest.pipeline.settings import Settings
from tests.support.docx_files import IMAGE_RELS, build_docx, document_xml

LIMITS = {
    "max_uncompressed_bytes": Settings.model_fields["max_docx_uncompressed_bytes"].default,
    "max_compression_ratio": Settings.model_fields["max_docx_compression_ratio"].default,
}


def extract(path: Path) -> ExtractedDocument:
    return extract_docx(path.read_bytes(), **LIMITS)


def headings(document: ExtractedDocument) -> list[tuple[str, int]]:
    return [(b.text, b.level) for b in document.blocks if b.kind is BlockKind.HEADING]


def of_kind(document: ExtractedDocument, kind: BlockKind) -> list[str]:
    return [b.text for b in document.blocks if b.kind is kind]


def full_text(document: ExtractedDocument) -> str:
    return join_blocks(document.blocks)[0]


# --- real documents ------------------------------------------------------------------


def test_tika_sample_metadata_headings_table_and_links(corpus_dir: Path) -> None:
    document = extract(corpus_dir / "docx" / "tika-sample-word-document.docx")

    assert document.title == "Sample Word Document"
    assert document.author == "Keith Bennett"
    assert document.created == datetime(2008, 12, 11, 16, 4, tzinfo=UTC)
    assert document.modified == datetime(2010, 11, 12, 16, 21, tzinfo=UTC)
    assert document.extra["last_modified_by"] == "Nick Burch"
    assert headings(document)[:6] == [
        ("Sample Word Document Title", 1),  # style Title
        ("And now for a subtitle", 2),  # style Subtitle
        ("Main Heading", 1),  # LibreOffice's plain "Heading" style
        ("Heading Level 1", 1),
        ("Heading Level 2", 2),
        ("Heading Level 3", 3),
    ]
    (table,) = of_kind(document, BlockKind.TABLE)
    # First column of rows 1 and 3; row 2 holds a nested table, kept inside its cell.
    assert table == (
        "This is a table\nNested table More of our nested table\nThe table has things in it"
    )
    # Hyperlink runs are part of the paragraph text.
    assert "Apache Tika: http://tika.apache.org/ Tika" in of_kind(document, BlockKind.PARAGRAPH)
    # The header goes to metadata, the footer nowhere.
    assert document.extra["header"] == "This is the header for our document"
    assert "footer for our document" not in full_text(document)
    assert "header for our document" not in full_text(document)


def test_worldview_headings_and_title_without_core_properties(corpus_dir: Path) -> None:
    path = corpus_dir / "docx" / "worldview-essay-assignment.docx"
    assert "docProps/core.xml" not in zipfile.ZipFile(path).namelist()

    document = extract(path)

    # Ten heading paragraphs, one of them empty (a Heading 3 with no text).
    assert headings(document) == [
        ("Personal Worldview Essay", 1),
        ("Basics", 1),
        ("Body", 1),
        ("Introduction", 2),
        ("Body Paragraphs", 2),
        ("Your worldview", 3),
        ("The origins of your worldviews", 3),
        ("Conclusion", 2),
        ("Essay Memo", 1),
    ]
    # Not python-docx's invented default "Word Document": the Title paragraph.
    assert document.title == "Personal Worldview Essay"
    assert document.author is None and document.modified is None
    assert of_kind(document, BlockKind.LIST)[0] == (
        "- The essay should be at least 1200 words with fully-developed ideas and details.\n"
        "- You must answer all questions asked in each section below.\n"
        "- You do not have to use sources for the essay, but you should use your readings "
        "and the videos you watched to inform your ideas."
    )


def test_complex_numbered_lists_are_merged_and_nested(corpus_dir: Path) -> None:
    document = extract(corpus_dir / "docx" / "complex-numbered-lists.docx")

    kinds = [b.kind.value for b in document.blocks]
    assert kinds == ["paragraph", "list", "paragraph", "list", "paragraph"]
    first, second = of_kind(document, BlockKind.LIST)
    assert first == (
        "- Entry #1\n- Entry #2, with children\n  - 2-a\n  - 2-b\n  - 2-c\n- Entry #3\n"
        "- Entry #4\n- Restarted to 1 from 5\n- Restarted @ 2\n- Restarted @ 3\n"
        "- Jump to new list at 10\n- Now 11"
    )
    assert second == "- Carrying on @ 12\n- Carrying on @ 13"
    assert document.blocks[2].text == "Normal text here"


def test_statistics_tables_keep_cells_and_skip_footer(corpus_dir: Path) -> None:
    document = extract(corpus_dir / "docx" / "statistics-homework-tables.docx")

    tables = of_kind(document, BlockKind.TABLE)
    assert len(tables) == 21
    # The title cell spans four columns and is given once.
    assert tables[0] == (
        "Test of Equality over Strata\nTest | Chi-Square | DF | Pr > Chi-Square\n"
        "Log-Rank | 1.5209 | 1 | 0.2175\nWilcoxon | 0.7660 | 1 | 0.3815\n"
        "-2Log(LR) | 3.2114 | 1 | 0.0731"
    )
    assert "The SAS System" in tables
    assert "Page 14 of 14" not in full_text(document)


def test_debian_libreoffice_headings_tables_code_and_nbsp_title(corpus_dir: Path) -> None:
    document = extract(corpus_dir / "docx" / "debian-reference-ch04-libreoffice.docx")

    assert document.title == "Chapter 4. Authentication and access controls"
    found = headings(document)
    assert len(found) == 20
    assert found[0] == ("Chapter 4. Authentication and access controls", 1)
    assert ("4.1. Normal Unix authentication", 2) in found
    assert ("4.5.1. Configuration files accessed by PAM and NSS", 3) in found
    tables = of_kind(document, BlockKind.TABLE)
    assert len(tables) == 24
    assert "/etc/shadow | -rw-r----- | root | shadow | secure user account information" in (
        "\n".join(tables).split("\n")
    )
    # "Preformatted Text" paragraphs become one verbatim code block (leading space kept).
    assert (
        " ...\nuser1:x:1000:1000:User1 Name,,,:/home/user1:/bin/bash\n"
        "user2:x:1001:1001:User2 Name,,,:/home/user2:/bin/bash\n ..."
    ) in of_kind(document, BlockKind.CODE)
    assert "\xa0" not in full_text(document)


def test_taiwan_text_boxes_once_each(corpus_dir: Path) -> None:
    document = extract(corpus_dir / "docx" / "taiwan-cdc-flowchart-textboxes.docx")

    assert document.title == "傳染病通報作業流程"
    assert document.author == "吳麗招"
    text = full_text(document)
    # All of these live only in text boxes, each stored twice (mc:Choice and mc:Fallback).
    for sentence in (
        "Student falls ill",
        "Case closed.",
        "The Health Bureau will handle reporting and specimen collection.",
        "Implement appropriate epidemic prevention measures in accordance with the "
        "Communicable Disease Control Act.",
    ):
        assert text.count(sentence) == 1, sentence
    # The text box follows the paragraph that anchors it.
    assert text.index("Infectious Disease Reporting Procedure") < text.index("Student falls ill")


def test_russian_contract_cyrillic_metadata_and_text(corpus_dir: Path) -> None:
    document = extract(corpus_dir / "docx" / "russian-state-contract.docx")

    assert document.title == "ЧАСТЬ II"
    assert document.author == "Регина Чадина"
    assert document.extra["last_modified_by"] == "Гошовская Елена В."
    assert "Комитет по информатизации и связи, именуемый в дальнейшем «Государственный " in (
        full_text(document)
    )
    # Paragraphs with a direct outline level are headings.
    assert ("Перечень сокращений", 1) in headings(document)


def test_doj_handbook_every_paragraph_comes_through(corpus_dir: Path) -> None:
    path = corpus_dir / "docx" / "doj-chapter13-trustee-handbook-872p.docx"
    document = extract(path)

    lines = {
        line.lstrip(" ").removeprefix("- ") for b in document.blocks for line in b.text.split("\n")
    }
    reference = [" ".join(p.text.split()) for p in docx.Document(str(path)).paragraphs]
    missing = [text for text in reference if text and text not in lines]
    assert missing == []
    assert len(full_text(document).split()) >= 126_976  # python-docx's count, tables excluded
    assert (
        "The standing trustee’s inability to administer cases also may result in the United "
        "States Trustee filing a motion under 11 U.S.C. § 324 to remove the standing trustee "
        "from all existing cases."
    ) in full_text(document)
    assert len(headings(document)) == 294  # 300 heading paragraphs, 6 of them empty


def test_header_footer_unicode(corpus_dir: Path) -> None:
    document = extract(corpus_dir / "docx" / "header-footer-unicode.docx")

    assert document.extra["header"] == "This is a simple header, with a € euro symbol in it."
    assert ("Molière", 1) in headings(document)
    assert "L'Avare ou l'École du mensonge" in of_kind(document, BlockKind.PARAGRAPH)
    assert "The footer, with Molière" not in full_text(document)


def test_strict_ooxml_is_read(corpus_dir: Path) -> None:
    document = extract(corpus_dir / "docx" / "edge-strict-ooxml.docx")

    assert document.blocks == [Block("Some text", BlockKind.PARAGRAPH)]
    assert document.author == "Cragun, Randy"
    assert document.created == datetime(2021, 11, 14, 22, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("name", "error", "code"),
    [
        ("corrupt-truncated.docx", CorruptDocument, "corrupt_document"),  # no central directory
        ("encrypted-password-pass.docx", EncryptedDocument, "encrypted_document"),  # OLE2
    ],
)
def test_unreadable_corpus_files(
    corpus_dir: Path, name: str, error: type[IngestError], code: str
) -> None:
    with pytest.raises(error) as caught:
        extract(corpus_dir / "docx" / name)
    assert caught.value.code == code


# --- packages built here ---------------------------------------------------------------


def peak_memory(call: Callable[[], object]) -> int:
    """Return the peak of Python allocations, in bytes, while `call` runs."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_markup_python_docx_paragraph_text_misses() -> None:
    body = (
        # tracked insertion kept, tracked deletion dropped
        "<w:p><w:r><w:t>Kept </w:t></w:r><w:ins><w:r><w:t>inserted</w:t></w:r></w:ins>"
        "<w:del><w:r><w:delText>deleted</w:delText></w:r></w:del></w:p>"
        # inline content control and simple field
        "<w:p><w:sdt><w:sdtContent><w:r><w:t>In a control</w:t></w:r></w:sdtContent></w:sdt>"
        '<w:fldSimple w:instr="PAGE"><w:r><w:t xml:space="preserve"> 7</w:t></w:r></w:fldSimple>'
        "</w:p>"
        # block-level content control, direct outline level, list switched off by numId 0
        '<w:sdt><w:sdtContent><w:p><w:pPr><w:outlineLvl w:val="1"/></w:pPr>'
        "<w:r><w:t>Outline heading</w:t></w:r></w:p></w:sdtContent></w:sdt>"
        '<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/><w:numId w:val="0"/></w:numPr></w:pPr>'
        "<w:r><w:t>Not a list item</w:t></w:r></w:p>"
        # vertically merged cell: its text once, not repeated in the continuation row
        '<w:tbl><w:tr><w:tc><w:tcPr><w:vMerge w:val="restart"/></w:tcPr><w:p><w:r>'
        "<w:t>Merged</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>a</w:t></w:r></w:p></w:tc>"
        "</w:tr><w:tr><w:tc><w:tcPr><w:vMerge/></w:tcPr><w:p/></w:tc><w:tc><w:p><w:r>"
        "<w:t>b</w:t></w:r></w:p></w:tc></w:tr></w:tbl>"
    )
    document = extract_docx(build_docx(document_xml(body)), **LIMITS)

    assert document.blocks == [
        Block("Kept inserted", BlockKind.PARAGRAPH),
        Block("In a control 7", BlockKind.PARAGRAPH),
        Block("Outline heading", BlockKind.HEADING, level=2),
        Block("Not a list item", BlockKind.PARAGRAPH),
        Block("Merged | a\nb", BlockKind.TABLE),
    ]
    assert document.title is None and document.extra == {}


def test_zip_bomb_is_refused_before_inflating() -> None:
    # 200 MiB of zeros deflate to about 200 KB: a ratio near 1,000.
    bomb = build_docx(document_xml("<w:p/>"), zeros=("word/media/zeros.bin", 200))
    assert len(bomb) < 1_000_000

    def refuse() -> None:
        with pytest.raises(DocumentTooLarge, match="decompression bomb"):
            extract_docx(bomb, **LIMITS)

    # CPU time, which a loaded machine does not stretch as it does wall time.
    started = time.process_time()
    assert peak_memory(refuse) < 16 * 1024 * 1024
    assert time.process_time() - started < 1.0


def test_total_declared_size_limit() -> None:
    data = build_docx(document_xml("<w:p><w:r><w:t>Hello</w:t></w:r></w:p>"))
    with pytest.raises(DocumentTooLarge, match="declares"):
        extract_docx(data, max_uncompressed_bytes=500, max_compression_ratio=200.0)


def test_member_that_lies_about_its_size_is_never_fully_inflated() -> None:
    """A part python-docx loads declares 1,000 bytes (CRC to match) but inflates to 100 MiB.

    Given this file directly, python-docx 1.2 peaks above 200 MB.
    """
    honest = build_docx(
        document_xml("<w:p><w:r><w:t>Hi</w:t></w:r></w:p>"),
        members={"word/_rels/document.xml.rels": IMAGE_RELS},
        zeros=("word/media/image1.png", 100),
    )
    liar = declare_size(honest, "word/media/image1.png", size=1000)
    documents: list[ExtractedDocument] = []

    assert peak_memory(lambda: documents.append(extract_docx(liar, **LIMITS))) < 16 * 2**20
    assert documents[0].blocks == [Block("Hi", BlockKind.PARAGRAPH)]


def declare_size(data: bytes, name: str, *, size: int) -> bytes:
    """Rewrite a member's declared size (local header and central directory) and CRC."""
    patched = bytearray(data)
    crc = zlib.crc32(bytes(size))
    offset = zipfile.ZipFile(io.BytesIO(data)).getinfo(name).header_offset
    struct.pack_into("<I", patched, offset + 14, crc)
    struct.pack_into("<I", patched, offset + 22, size)
    entry = patched.find(b"PK\x01\x02")
    while patched[entry + 46 : entry + 46 + len(name)] != name.encode():
        entry = patched.find(b"PK\x01\x02", entry + 4)
    struct.pack_into("<I", patched, entry + 16, crc)
    struct.pack_into("<I", patched, entry + 24, size)
    return bytes(patched)


def test_too_many_members() -> None:
    members = {f"word/media/m{i}.xml": "" for i in range(20_000)}
    data = build_docx(document_xml("<w:p/>"), members=members)
    with pytest.raises(DocumentTooLarge, match="20,003 ZIP members"):
        extract_docx(data, **LIMITS)


def test_external_entity_is_refused_and_never_resolved() -> None:
    secret = Path("/etc/passwd").read_text().splitlines()[0]
    prolog = '<!DOCTYPE w:document [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
    xml = document_xml("<w:p><w:r><w:t>&xxe;</w:t></w:r></w:p>", prolog=prolog)

    with pytest.raises(CorruptDocument, match="entity declarations") as caught:
        extract_docx(build_docx(xml), **LIMITS)
    assert secret not in caught.value.message
    # And python-docx's own parser, behind the refusal, does not resolve entities either.
    parsed = parse_xml(xml.encode())
    assert secret not in "".join(parsed.itertext())
    assert secret not in etree.tostring(parsed, encoding="unicode")


def test_not_a_zip_or_no_document_part() -> None:
    with pytest.raises(CorruptDocument, match="not a readable ZIP"):
        extract_docx(b"PK\x03\x04 but nothing else", **LIMITS)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
    with pytest.raises(CorruptDocument, match="no word/document.xml"):
        extract_docx(buffer.getvalue(), **LIMITS)


def test_other_office_package_and_legacy_ole2() -> None:
    spreadsheet = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"
    with pytest.raises(UnsupportedFormat, match="not a Word document"):
        extract_docx(build_docx(document_xml("<w:p/>"), main=spreadsheet), **LIMITS)
    legacy_doc = bytes.fromhex("d0cf11e0a1b11ae1") + bytes(4096)
    with pytest.raises(UnsupportedFormat, match="legacy binary Office file"):
        extract_docx(legacy_doc, **LIMITS)
