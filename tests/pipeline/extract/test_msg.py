"""Outlook `.msg` messages, written at test time (`ole2_files`: the corpus has none)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from docingest.pipeline.detect import detect
from docingest.pipeline.document import BlockKind, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import CorruptDocument
from docingest.pipeline.extract import extract
from docingest.pipeline.extract.lzfu import decompress_rtf
from docingest.pipeline.settings import Settings
from tests.support import ole2_files
from tests.support.paths import CORPUS_DIR

SETTINGS = Settings(isolate_extraction=False)


def _read(data: bytes, settings: Settings = SETTINGS) -> ExtractedDocument:
    return extract(data, detect(data, filename="message.msg"), settings=settings)


def test_headers_become_metadata_and_the_subject_heads_the_body() -> None:
    data = ole2_files.msg(
        subject="Turbine inspection", body="Hi team,\r\n\r\nThe inspection is on Friday.\r\n",
        cc="Grace Hopper", message_id="<abc@example.org>",
    )  # fmt: skip
    document = _read(data)
    assert document.format is DocumentFormat.MSG
    assert document.title == "Turbine inspection"
    assert document.author == "Ada Lovelace <ada@example.org>"
    assert document.created == datetime(2024, 1, 17, 21, 20, tzinfo=UTC)
    assert document.extra["to"] == "Charles Babbage"
    assert document.extra["cc"] == "Grace Hopper"
    assert document.extra["message_id"] == "<abc@example.org>"
    assert [(b.kind, b.text) for b in document.blocks] == [
        (BlockKind.HEADING, "Turbine inspection"),
        (BlockKind.PARAGRAPH, "Hi team,"),
        (BlockKind.PARAGRAPH, "The inspection is on Friday."),
    ]


def test_an_html_body_is_read_when_there_is_no_plain_one() -> None:
    html = (
        "<html><body><h1>Agenda</h1><p>Budget review first.</p><ul><li>Q3</li></ul></body></html>"
    )
    document = _read(ole2_files.msg(subject="Meeting", html=html))
    texts = [(b.kind, b.level, b.text) for b in document.blocks]
    assert (BlockKind.HEADING, 2, "Agenda") in texts  # one level under the subject
    assert any("Budget review first." in text for _, _, text in texts)


def test_attachments_become_sections_and_an_attached_message_is_read() -> None:
    docx = (CORPUS_DIR / "docx/tika-sample-word-document.docx").read_bytes()
    forwarded = ole2_files.message_storage(
        subject="Original request", body="Please send the figures.", top=False
    )
    data = ole2_files.msg(
        subject="Fwd: figures", body="See below.",
        attachments=[("sample.docx", docx), ("original.msg", forwarded), ("logo.bin", b"\x00\x01")],
    )  # fmt: skip
    document = _read(data)
    headings = [(b.level, b.text) for b in document.blocks if b.kind is BlockKind.HEADING]
    assert (1, "sample.docx") in headings and (2, "Sample Word Document Title") in headings
    assert (1, "original.msg") in headings and (2, "Original request") in headings
    assert "Please send the figures." in [b.text for b in document.blocks]
    assert document.extra["attachments"] == ["sample.docx", "original.msg"]
    assert document.extra["attachments_not_extracted"] == ["logo.bin"]


def test_attached_messages_are_read_to_the_depth_limit_then_listed() -> None:
    data = ole2_files.nested_msg(200)
    document = _read(data, Settings(isolate_extraction=False, max_attachment_depth=2))
    texts = [b.text for b in document.blocks]
    assert "Message level 1." in texts and "Message level 2." in texts
    assert "Message level 3." not in texts
    assert document.extra["attachments"] == ["level-1.msg"]


def test_the_compressed_rtf_body_decompresses_as_the_specification_says() -> None:
    # MS-OXRTFCP section 3.1.1, "Compressing a string" example.
    compressed = bytes.fromhex(
        "2d0000002b0000004c5a4675f1c5c7a703000a00726370673132354232"
        "0af32068656c09002062770" "5b06c647d0a800fa0"
    )  # fmt: skip
    assert decompress_rtf(compressed) == b"{\\rtf1\\ansi\\ansicpg1252\\pard hello world}\r\n"


def test_a_compound_file_whose_chain_loops_is_corrupt() -> None:
    data = ole2_files.msg(subject="Loop", body="x" * 5000)  # a big stream: a FAT chain
    for damaged in (
        ole2_files.with_fat_loop(data, self_pointing=True),
        ole2_files.with_fat_loop(data, self_pointing=False),
        ole2_files.with_directory_loop(data),
    ):
        with pytest.raises(CorruptDocument):
            _read(damaged)
