from __future__ import annotations

import gzip
import io
import random
import re
import time
import zipfile
from pathlib import Path

import pytest

from docingest.pipeline.detect import detect, extension_note
from docingest.pipeline.document import DocumentFormat
from docingest.pipeline.errors import (
    CorruptDocument,
    EmptyDocument,
    EncryptedDocument,
    UnsupportedFormat,
)
from tests.support import ole2_files
from tests.support.paths import CORPUS_DIR

FOLDERS = {
    "pdf": DocumentFormat.PDF,
    "docx": DocumentFormat.DOCX,
    "html": DocumentFormat.HTML,
    "markdown": DocumentFormat.MARKDOWN,
    "txt": DocumentFormat.TXT,
    "pptx": DocumentFormat.PPTX,
    "xlsx": DocumentFormat.XLSX,
    "csv": DocumentFormat.CSV,
    "epub": DocumentFormat.EPUB,
    "odt": DocumentFormat.ODT,
    "eml": DocumentFormat.EML,
}
# Files whose outcome is not the folder's format.
EXCEPTIONS: dict[str, type[Exception]] = {
    "pdf/corrupt-empty-0-bytes.pdf": EmptyDocument,
    "txt/edge-empty-0-bytes.txt": EmptyDocument,
    "docx/encrypted-password-pass.docx": EncryptedDocument,
    "eml/empty.eml": EmptyDocument,  # whitespace only
}
CORPUS_FILES = sorted(
    f"{folder}/{path.name}" for folder in FOLDERS for path in (CORPUS_DIR / folder).iterdir()
)


def _zip(names: list[str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in names:
            archive.writestr(name, "<x/>")
    return buffer.getvalue()


@pytest.mark.parametrize("relative", CORPUS_FILES)
def test_every_corpus_file_is_detected_as_its_folder_says(corpus_dir: Path, relative: str) -> None:
    path = corpus_dir / relative
    data = path.read_bytes()
    if relative in EXCEPTIONS:
        with pytest.raises(EXCEPTIONS[relative]):
            detect(data, filename=path.name)
        return
    expected = FOLDERS[relative.split("/")[0]]
    assert detect(data, filename=path.name).format is expected
    # The bytes decide: the same answer without any name or content type.
    assert detect(data).format is expected


def test_corpus_listing_covers_the_edge_cases() -> None:
    assert len(CORPUS_FILES) == 30 + 18 + 17 + 18 + 16 + 6 + 6 + 6 + 1 + 2 + 10
    assert "pdf/corrupt-header-only.pdf" in CORPUS_FILES
    assert "docx/corrupt-truncated.docx" in CORPUS_FILES


def test_encrypted_office_file_names_the_problem(corpus_dir: Path) -> None:
    data = (corpus_dir / "docx/encrypted-password-pass.docx").read_bytes()
    with pytest.raises(EncryptedDocument, match="password-protected Office document") as caught:
        detect(data, filename="encrypted-password-pass.docx")
    assert caught.value.code == "encrypted_document"


def test_truncated_docx_goes_to_the_docx_extractor(corpus_dir: Path) -> None:
    data = (corpus_dir / "docx/corrupt-truncated.docx").read_bytes()
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(io.BytesIO(data))  # the central directory is gone
    assert detect(data).format is DocumentFormat.DOCX


def test_empty_and_whitespace_only_files_are_empty() -> None:
    for data in (b"", b" \n\t\r\n ", b"\xff\xfe \x00\n\x00"):  # the last: UTF-16 spaces
        with pytest.raises(EmptyDocument) as caught:
            detect(data, filename="notes.txt")
        assert caught.value.code == "empty_document"


def test_text_encodings_are_reported(corpus_dir: Path) -> None:
    utf16 = (corpus_dir / "txt/utf16le-bom-subtitles.txt").read_bytes()
    assert detect(utf16).encoding == "utf-16-le"
    cyrillic = (corpus_dir / "txt/cp1251-russian.txt").read_bytes()
    assert detect(cyrillic).encoding == "cp1251"
    assert detect((corpus_dir / "markdown/llm-usage.md").read_bytes()).encoding == "utf-8"


def test_html_encoding_is_set_only_by_a_byte_order_mark(corpus_dir: Path) -> None:
    # The BOM says UTF-16 while <meta> says utf-8: the BOM must win downstream.
    steel = (corpus_dir / "html/steeljis-datasheet-utf16le-meta-says-utf8.html").read_bytes()
    assert detect(steel).encoding == "utf-16-le"
    # Without a BOM the HTML extractor decides, honouring <meta charset=gb2312>.
    gb = (corpus_dir / "html/xinhuanet-hebei-gb2312.html").read_bytes()
    assert detect(gb).encoding is None


@pytest.mark.parametrize(
    ("data", "filename", "kind"),
    [
        (b"\x7fELF\x02\x01\x01\x00" + bytes(56), "report.pdf", "an ELF executable"),
        (b"GIF89a\x01\x00\x01\x00" + bytes(20), "scan.png", "a GIF image"),
        (gzip.compress(b"hello world " * 100, mtime=0), "notes.txt", "a gzip archive"),
        (b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(20), "memo.md", "a WAV audio file"),
        (b"SQLite format 3\x00" + bytes(100), "data.txt", "an SQLite database"),
        (_zip(["[Content_Types].xml", "xl/styles.xml"]), "book.xlsx", "Excel package without"),
        (_zip(["[Content_Types].xml", "visio/document.xml"]), "draw.docx", "Visio drawing"),
        (_zip(["readme.txt"]), "archive.docx", "a ZIP archive"),
    ],
)
def test_binary_formats_are_refused_by_name(data: bytes, filename: str, kind: str) -> None:
    with pytest.raises(UnsupportedFormat, match=re.escape(kind)) as caught:
        detect(data, filename=filename)
    assert caught.value.code == "unsupported_format"


@pytest.mark.parametrize(
    ("data", "filename"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(17), "scan.txt"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(20), "photo.md"),
        (b"II*\x00\x08\x00\x00\x00" + bytes(20), "fax.pdf"),
        (b"MM\x00*\x00\x00\x00\x08" + bytes(20), "fax"),
        (b"RIFF\x24\x00\x00\x00WEBPVP8 " + bytes(20), "page.html"),
    ],
)
def test_images_are_detected_by_their_magic_for_ocr(data: bytes, filename: str) -> None:
    assert detect(data, filename=filename).format is DocumentFormat.IMAGE


def test_corpus_images_are_images(corpus_dir: Path) -> None:
    for path in sorted((corpus_dir / "images").iterdir()):
        assert detect(path.read_bytes(), filename=path.name).format is DocumentFormat.IMAGE


def test_random_bytes_are_binary_data() -> None:
    data = random.Random(0).randbytes(4096)
    with pytest.raises(UnsupportedFormat, match="binary data"):
        detect(data, filename="notes.txt", content_type="text/plain")


@pytest.mark.parametrize(
    ("root", "expected"),
    [
        ("WordDocument", DocumentFormat.DOC),
        ("Workbook", DocumentFormat.XLS),
        ("Book", DocumentFormat.XLS),  # Excel 5/95
        ("PowerPoint Document", DocumentFormat.PPT),
        ("__properties_version1.0", DocumentFormat.MSG),
    ],
)
def test_legacy_office_files_are_named_by_the_streams_at_their_root(
    root: str, expected: DocumentFormat
) -> None:
    data = ole2_files.build(ole2_files.Storage().add(root, b"x" * 600).add("Other", b"y"))
    assert detect(data, filename="whatever.bin").format is expected


def test_a_message_holding_a_word_attachment_is_a_message_not_a_doc() -> None:
    attachment = ole2_files.build(ole2_files.Storage().add("WordDocument", b"x" * 600))
    message = ole2_files.msg(subject="Report", body="See attached.",
                             attachments=[("report.doc", attachment)])  # fmt: skip
    assert detect(message).format is DocumentFormat.MSG


def test_other_compound_files_are_refused_by_kind() -> None:
    visio = ole2_files.build(ole2_files.Storage().add("VisioDocument", b"v" * 600))
    with pytest.raises(UnsupportedFormat, match="Visio drawing"):
        detect(visio, filename="plan.vsd")


def test_a_damaged_compound_file_is_corrupt_not_unsupported() -> None:
    fake = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(500) + "WordDocument".encode("utf-16-le")
    with pytest.raises(CorruptDocument, match="OLE2 compound file is damaged"):
        detect(fake, filename="letter.doc")


def test_rtf_is_detected_by_its_signature() -> None:
    assert detect(b"{\\rtf1\\ansi Hello}", filename="a.txt").format is DocumentFormat.RTF


def test_a_gmail_message_starting_with_a_from_line_is_an_email() -> None:
    gmail = (
        b"From 1790000000000000000@xxx Mon Jan 01 00:00:00 +0000 2024\n"
        b"X-GM-THRID: 1790000000000000000\nFrom: Ann <ann@example.org>\n"
        b"To: bob@example.org\nSubject: Lunch\nDate: Mon, 1 Jan 2024 10:00:00 +0000\n"
        b"Content-Type: text/html; charset=utf-8\n\n<html><body><p>Noon?</p></body></html>\n"
    )
    assert detect(gmail, filename="lunch.eml").format is DocumentFormat.EML
    assert detect(gmail).format is DocumentFormat.EML


def test_an_archive_of_messages_is_mbox_and_a_name_breaks_the_tie_for_one() -> None:
    one = (
        b"From ann@example.org Mon Jan  1 00:00:00 2024\nFrom: ann@example.org\nSubject: A\n\nHi.\n"
    )
    two = one + b"\n" + one.replace(b"Subject: A", b"Subject: B")
    assert detect(two).format is DocumentFormat.MBOX
    assert detect(two, filename="mail.mbox").format is DocumentFormat.MBOX
    assert detect(one).format is DocumentFormat.EML
    assert detect(one, filename="archive.mbox").format is DocumentFormat.MBOX


def test_mislabelled_files_are_detected_by_content(corpus_dir: Path) -> None:
    pdf = (corpus_dir / "pdf/arabic-rtl-word.pdf").read_bytes()
    assert detect(pdf, filename="paper.txt", content_type="text/plain").format is DocumentFormat.PDF
    html = b"<!DOCTYPE html>\n<html><head><title>T</title></head><body><p>Hi</p></body></html>"
    assert detect(html, filename="page.md", content_type="text/markdown").format is (
        DocumentFormat.HTML
    )
    markdown = (corpus_dir / "markdown/pdfplumber-README.md").read_bytes()
    assert detect(markdown, filename="README.txt").format is DocumentFormat.MARKDOWN


def test_pdf_header_after_leading_junk_is_still_pdf() -> None:
    data = b"HTTP/1.1 200 OK\r\n\r\n%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n%%EOF\n"
    assert detect(data).format is DocumentFormat.PDF
    # ... but text that only quotes the magic is text.
    quoting = b"# PDF files\n\nEvery PDF starts with `%PDF-1.7` and ends with `%%EOF`.\n"
    assert detect(quoting).format is DocumentFormat.MARKDOWN


def test_html_fragment_is_html_but_readme_with_inline_html_is_markdown(corpus_dir: Path) -> None:
    fragment = b"<div>\n<p>First paragraph.</p>\n<p>Second one.</p>\n</div>\n"
    assert detect(fragment, filename="snippet.md").format is DocumentFormat.HTML
    readme = (corpus_dir / "markdown/ragflow-README.md").read_bytes()
    assert readme.startswith(b'<div align="center">')
    assert detect(readme).format is DocumentFormat.MARKDOWN


def test_extension_breaks_ties_only_for_borderline_text(corpus_dir: Path) -> None:
    umlauts = (corpus_dir / "markdown/umlauts-non-utf8.md").read_bytes()  # "## können" + 2 lines
    assert detect(umlauts, filename="umlauts.md").format is DocumentFormat.MARKDOWN
    assert detect(umlauts, filename="umlauts.txt").format is DocumentFormat.TXT
    prose = b"Just a sentence of prose.\nAnd another line of it.\n"
    assert detect(prose, filename="note.md").format is DocumentFormat.MARKDOWN
    assert detect(prose, filename="note.txt").format is DocumentFormat.TXT
    assert detect(prose, content_type="text/markdown; charset=utf-8").format is (
        DocumentFormat.MARKDOWN
    )
    assert detect(prose).format is DocumentFormat.TXT
    # reStructuredText stays text even when named like Markdown.
    rst = (corpus_dir / "txt/python311-library-csv.rst.txt").read_bytes()
    assert detect(rst, filename="csv.md").format is DocumentFormat.TXT


# --- the formats of issue 16: packages by their directory, records by their shape ----------


def _package(members: dict[str, str], *, stored_mimetype: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        if stored_mimetype is not None:
            archive.writestr("mimetype", stored_mimetype, compress_type=zipfile.ZIP_STORED)
        for name, text in members.items():
            archive.writestr(name, text)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("data", "filename", "expected"),
    [
        (_package({"[Content_Types].xml": "", "xl/workbook.xml": ""}), "x.docx", "xlsx"),
        (_package({"[Content_Types].xml": "", "ppt/presentation.xml": ""}), None, "pptx"),
        (_package({"META-INF/container.xml": ""}, stored_mimetype="application/epub+zip"),
         "book.zip", "epub"),
        (_package({"META-INF/container.xml": ""}), None, "epub"),  # mimetype entry missing
        (_package({"content.xml": ""}, stored_mimetype="application/vnd.oasis.opendocument.text"),
         None, "odt"),
    ],
)  # fmt: skip
def test_packages_are_named_by_their_directory(
    data: bytes, filename: str | None, expected: str
) -> None:
    assert detect(data, filename=filename).format == expected


@pytest.mark.parametrize(
    ("mimetype", "expected"),
    [
        ("application/vnd.oasis.opendocument.spreadsheet", DocumentFormat.ODS),
        ("application/vnd.oasis.opendocument.presentation", DocumentFormat.ODP),
    ],
)
def test_opendocument_spreadsheets_and_presentations_are_named_by_their_mimetype(
    mimetype: str, expected: DocumentFormat
) -> None:
    package = _package({"content.xml": ""}, stored_mimetype=mimetype)
    assert detect(package, filename="x.zip").format is expected


def test_other_opendocument_files_are_refused_by_kind() -> None:
    odg = _package(
        {"content.xml": ""}, stored_mimetype="application/vnd.oasis.opendocument.graphics"
    )
    with pytest.raises(UnsupportedFormat, match="OpenDocument graphics"):
        detect(odg, filename="drawing.odg")


def test_a_truncated_workbook_goes_to_the_xlsx_extractor(corpus_dir: Path) -> None:
    data = (corpus_dir / "xlsx/stanley-cups.xlsx").read_bytes()
    cut = data[: len(data) // 2]
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(io.BytesIO(cut))
    assert detect(cut).format is DocumentFormat.XLSX  # the workbook part's local header says


def test_password_protected_workbook_and_deck_are_encrypted() -> None:
    # Office wraps an encrypted XLSX or PPTX in an OLE2 file with these two streams.
    package = ole2_files.Storage().add("EncryptionInfo", b"i" * 200)
    ole2 = ole2_files.build(package.add("EncryptedPackage", b"p" * 5000))
    for name in ("book.xlsx", "deck.pptx"):
        with pytest.raises(EncryptedDocument, match="password-protected"):
            detect(ole2, filename=name)


def test_rfc822_headers_make_an_email_whatever_the_name() -> None:
    mail = b"From: Ann <ann@example.org>\nTo: Bob <bob@example.org>\nSubject: Hi\n\nBody.\n"
    assert detect(mail, filename="notes.txt").format is DocumentFormat.EML
    # A text that opens with one "Name: value" line is no e-mail.
    memo = b"Subject: the budget\n\nWe meet on Monday to talk about the budget.\n"
    assert detect(memo).format is DocumentFormat.TXT


def test_delimited_records_are_csv_unless_the_name_says_prose() -> None:
    table = b"Region,Sales,Year\nNorth,1200,2023\nSouth,900,2023\nEast,700,2024\n"
    assert detect(table).format is DocumentFormat.CSV
    assert detect(table.replace(b",", b"\t"), filename="t.tsv").format is DocumentFormat.CSV
    assert detect(table, filename="table.txt").format is DocumentFormat.TXT  # a tie: the name
    prose = b"Hello, world.\nThis line, like the first, has a comma.\nSo, too, does this.\n"
    assert detect(prose).format is DocumentFormat.TXT


def test_csv_sniffing_is_fast_on_one_huge_line() -> None:
    # CPU time, which a loaded machine does not stretch as it does wall time.
    started = time.process_time()
    for line in (b'"a",' * 65_536, b",;\t\"'" * 50_000):
        detect(line)
    assert time.process_time() - started < 5


SVG = (
    b'<?xml version="1.0" standalone="no"?>\n'
    b'<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
    b'"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n'
    b'<svg width="200" height="100" xmlns="http://www.w3.org/2000/svg">'
    b'<text x="10" y="50">Quarterly revenue</text></svg>\n'
)


@pytest.mark.parametrize(
    "data",
    [SVG, SVG.split(b"\n", 2)[2], b"<!-- drawn by hand -->\n" + SVG.split(b"\n", 2)[2]],
    ids=["prolog and doctype", "bare root", "comment first"],
)
def test_svg_is_refused_not_indexed_as_raw_xml(data: bytes) -> None:
    """It was read as plain text: its XML prolog and DOCTYPE became the first chunk."""
    with pytest.raises(UnsupportedFormat, match="SVG image") as caught:
        detect(data, filename="chart.svg")
    assert caught.value.code == "unsupported_format"


def test_a_page_with_inline_svg_is_still_html() -> None:
    page = b"<html><body><p>Revenue grew.</p><svg><text>Q1</text></svg></body></html>"
    assert detect(page, filename="report.html").format is DocumentFormat.HTML


@pytest.mark.parametrize(
    ("data", "filename", "note"),
    [
        (b"Plain notes about the harbour.\n" * 5, "notes.pdf", "named .pdf but holds plain text"),
        (b"%PDF-1.7\n1 0 obj\nendobj\nstartxref\n", "scan.PNG", "named .png but holds a PDF"),
        (b"<html><body><p>x</p></body></html>", "page.txt", "named .txt but holds HTML"),
        (b"# Title\n\nSome *text*.\n", "notes.txt", None),  # a tie the name breaks
        (b"a,b\n1,2\n", "table.txt", None),
        (b"Plain notes.\n", "notes", None),
        (b"Plain notes.\n", "notes.log", None),  # a name we make no promise about
    ],
)
def test_a_name_that_promises_another_format_is_noted(
    data: bytes, filename: str, note: str | None
) -> None:
    found = extension_note(filename, detect(data, filename=filename).format)
    assert (found is None) if note is None else (found is not None and note in found), found
