"""EPUB extraction on the corpus's e-book, plus small e-books written by the test."""

from __future__ import annotations

import io
import time
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from docingest.pipeline.chunking import chunk_document
from docingest.pipeline.detect import detect
from docingest.pipeline.document import (
    Block,
    BlockKind,
    DocumentFormat,
    ExtractedDocument,
    join_blocks,
)
from docingest.pipeline.errors import CorruptDocument, EncryptedDocument
from docingest.pipeline.extract import zip_limits
from docingest.pipeline.extract.epub import extract_epub
from docingest.pipeline.settings import Settings

LIMITS = zip_limits(Settings())
CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" '
    'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
    '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
    "</rootfiles></container>"
)
NAV = (
    '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">'
    '<body><nav epub:type="toc"><ol>'
    '<li><a href="text/one.xhtml">The First Chapter</a></li>'
    '<li><a href="text/two.xhtml#start">The Second Chapter</a>'
    '<ol><li><a href="text/two.xhtml#later">A Later Part</a></li></ol></li>'
    "</ol></nav></body></html>"
)


def chapter(body: str) -> str:
    return (
        '<?xml version="1.0" encoding="utf-8"?><!DOCTYPE html>'
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>t</title></head>'
        f"<body>{body}</body></html>"
    )


def build_epub(
    *,
    spine: str = '<itemref idref="one"/><itemref idref="two"/>',
    extra: dict[str, str] | None = None,
) -> bytes:
    """An EPUB 3 of two chapters without headings of their own, titled by the nav document."""
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>A Small Book</dc:title>'
        "<dc:creator>Ann Author</dc:creator><dc:creator>Bob Author</dc:creator>"
        "<dc:language>de</dc:language>"
        '<meta property="dcterms:modified">2024-01-02T03:04:05Z</meta></metadata><manifest>'
        '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        '<item id="one" href="text/one.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="two" href="text/two.xhtml" media-type="application/xhtml+xml"/>'
        f"</manifest><spine>{spine}</spine></package>"
    )
    members = {
        "META-INF/container.xml": CONTAINER,
        "OEBPS/content.opf": opf,
        "OEBPS/nav.xhtml": NAV,
        "OEBPS/text/one.xhtml": chapter("<p>The first chapter opens in the mountains.</p>"),
        "OEBPS/text/two.xhtml": chapter(
            '<div id="start"><p>The second chapter begins on the ice.</p></div>'
            '<p id="later">Much later the skaters rest.</p>'
        ),
        **(extra or {}),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", "application/epub+zip", zipfile.ZIP_STORED)
        for name, text in members.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def extract(data: bytes) -> ExtractedDocument:
    return extract_epub(data, limits=LIMITS)


def test_spine_order_with_toc_titles_as_headings_and_opf_metadata() -> None:
    data = build_epub()
    assert detect(data).format is DocumentFormat.EPUB
    document = extract(data)
    assert document.blocks == [
        Block("The First Chapter", BlockKind.HEADING, 1),
        Block("The first chapter opens in the mountains."),
        Block("The Second Chapter", BlockKind.HEADING, 1),
        Block("The second chapter begins on the ice."),
        Block("A Later Part", BlockKind.HEADING, 2),
        Block("Much later the skaters rest."),
    ]
    assert (document.title, document.author) == ("A Small Book", "Ann Author, Bob Author")
    assert document.modified == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert document.extra == {"chapters": 2, "language": "de"}


def test_a_looping_spine_reads_each_document_once() -> None:
    spine = '<itemref idref="one"/><itemref idref="two"/>' * 5000
    # CPU time, which a loaded machine does not stretch as it does wall time.
    started = time.process_time()
    document = extract(build_epub(spine=spine))
    assert time.process_time() - started < 10
    text = join_blocks(document.blocks)[0]
    assert text.count("The first chapter opens in the mountains.") == 1
    assert document.extra["chapters"] == 2


def test_drm_encrypted_chapters_are_encrypted_document() -> None:
    encryption = (
        '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:CipherData>'
        '<enc:CipherReference URI="OEBPS/text/one.xhtml"/></enc:CipherData></enc:EncryptedData>'
        "</encryption>"
    )
    with pytest.raises(EncryptedDocument, match="DRM"):
        extract(build_epub(extra={"META-INF/encryption.xml": encryption}))


def test_missing_container_or_spine_is_corrupt() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip")
    with pytest.raises(CorruptDocument, match="no META-INF/container.xml"):
        extract(buffer.getvalue())
    with pytest.raises(CorruptDocument, match="malformed XML"):
        extract(build_epub(extra={"OEBPS/content.opf": "<package"}))


def test_gutenberg_ebook_chunks_carry_their_chapter(corpus_dir: Path) -> None:
    document = extract((corpus_dir / "epub/winter-sports.epub").read_bytes())
    assert document.title == "Winter Sports in Switzerland"
    assert document.author == "E. F. Benson"
    assert document.extra["language"] == "en"
    chunks = chunk_document(document.blocks, chunk_size=1000, chunk_overlap=100)
    phrase = "these are known as mohawks and choctaws"
    hits = [c for c in chunks if phrase in " ".join(c.text.split()).lower()]
    assert hits, "the passage from the middle of the book was not extracted"
    # The passage opens a new file of the spine: it stays in the chapter the file continues.
    assert hits[0].headings[-1] == "CHAPTER II RINKS AND SKATERS"
