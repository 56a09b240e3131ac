"""E-mail extraction on the corpus's messages, plus messages built here with `email`."""

from __future__ import annotations

import io
import time
from datetime import UTC, datetime
from email.message import EmailMessage
from email.mime.message import MIMEMessage
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from docingest.pipeline.detect import detect
from docingest.pipeline.document import Block, BlockKind, ExtractedDocument, join_blocks
from docingest.pipeline.errors import CorruptDocument, DocumentTooLarge, EncryptedDocument
from docingest.pipeline.extract import extract
from docingest.pipeline.settings import Settings
from tests.support.bounded_files import many_part_email


def extract_bytes(data: bytes, **settings: Any) -> ExtractedDocument:
    return extract(data, detect(data, filename="message.eml"), settings=Settings(**settings))


def corpus(corpus_dir: Path, name: str) -> ExtractedDocument:
    return extract_bytes((corpus_dir / "eml" / name).read_bytes())


def test_headers_are_metadata_and_the_subject_heads_the_body(corpus_dir: Path) -> None:
    document = corpus(corpus_dir, "fake-email.eml")
    assert document.title == "Test Email"
    assert document.author == "Matthew Robinson <mrobinson@unstructured.io>"
    assert document.created == datetime(2022, 12, 16, 22, 4, 16, tzinfo=UTC)
    assert document.extra["to"] == "NotMatthew <NotMatthew@notunstructured.com>"
    assert document.extra["message_id"].startswith("<CADc-_x")
    assert document.blocks[0] == Block("Test Email", BlockKind.HEADING, 1)
    assert Block("This is a test email to use for unit tests.") in document.blocks


def test_utf16_message_reads_like_its_utf8_twin(corpus_dir: Path) -> None:
    utf16 = corpus(corpus_dir, "fake-email-utf-16-le.eml")
    assert utf16.title == "Test Email"
    assert Block("This is a test email to use for unit tests.") in utf16.blocks


def test_html_only_body_goes_through_the_html_extractor(corpus_dir: Path) -> None:
    document = corpus(corpus_dir, "mime-html-only.eml")
    text = join_blocks(document.blocks)[0]
    assert "Gmail was launched by Google in 2004" in text
    assert "<p>" not in text


def test_encoded_words_in_the_subject_are_decoded(corpus_dir: Path) -> None:
    assert corpus(corpus_dir, "mime-word-encoded-subject.eml").title == (
        "Simple email with ☸☿ Unicode subject"
    )


def test_broken_content_type_parameters_still_give_the_body(corpus_dir: Path) -> None:
    document = corpus(corpus_dir, "fake-email-malformed-encoding.eml")
    assert Block("This is a test email to use for unit tests.") in document.blocks


def test_text_attachment_is_a_section_and_an_image_is_listed(corpus_dir: Path) -> None:
    document = corpus(corpus_dir, "fake-email-attachment.eml")
    assert document.extra["attachments"] == ["fake-attachment.txt"]
    at = document.blocks.index(Block("fake-attachment.txt", BlockKind.HEADING, 1))
    assert document.blocks[at + 1] == Block("Hey this is a fake attachment!")
    image = corpus(corpus_dir, "email-with-image.eml")
    assert image.extra["attachments_not_extracted"] == ["unstructured_logo.png"]


def test_pgp_encrypted_message_is_encrypted_document(corpus_dir: Path) -> None:
    with pytest.raises(EncryptedDocument, match="encrypted"):
        corpus(corpus_dir, "fake-encrypted.eml")


def _message(subject: str, body: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = "Ann <ann@example.org>"
    message["To"] = "Bob <bob@example.org>"
    message["Subject"] = subject
    message.set_content(body)
    return message


def test_spreadsheet_attachment_is_extracted_with_its_sheet_one_level_down() -> None:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.title = "Budget"
    sheet.append(["Item", "Cost"])
    sheet.append(["Projector", 300])
    buffer = io.BytesIO()
    workbook.save(buffer)
    message = _message("Budget", "The budget is attached.")
    message.add_attachment(
        buffer.getvalue(),
        maintype="application",
        subtype="vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        filename="budget.xlsx",
    )
    document = extract_bytes(message.as_bytes())
    assert document.blocks[-3:] == [
        Block("budget.xlsx", BlockKind.HEADING, 1),
        Block("Budget", BlockKind.HEADING, 2),
        Block("Item: Projector; Cost: 300", BlockKind.TABLE),
    ]


def nested_message(depth: int) -> bytes:
    """A message forwarding a message forwarding ... `depth` levels, each with its own line."""
    inner: MIMEMultipart | MIMEText = MIMEText("The innermost words are here.")
    inner["Subject"] = "Level 0"
    for level in range(1, depth + 1):
        outer = MIMEMultipart()
        outer["From"] = f"level{level}@example.org"
        outer["Subject"] = f"Level {level}"
        outer.attach(MIMEText(f"Body of level {level}."))
        outer.attach(MIMEMessage(inner))
        inner = outer
    return inner.as_bytes()


def test_an_email_nested_100_deep_is_read_to_the_depth_limit_only() -> None:
    data = nested_message(100)
    # CPU time, which a loaded machine does not stretch as it does wall time.
    started = time.process_time()
    document = extract_bytes(data, max_attachment_depth=3)
    assert time.process_time() - started < 10
    text = join_blocks(document.blocks)[0]
    for level in (100, 99, 98, 97):
        assert f"Body of level {level}." in text
    assert "Body of level 96." not in text
    deepest = [b for b in document.blocks if b.kind is BlockKind.HEADING][-1]
    assert deepest == Block("Level 97", BlockKind.HEADING, 4)


def raw_nested_message(depth: int) -> bytes:
    """`nested_message` written by hand: `email` cannot write a message nested 150 deep."""
    message = b"Subject: Level 0\n\nThe innermost words are here.\n"
    for level in range(1, depth + 1):
        boundary = b"b%d" % level
        message = (
            b"From: level%d@example.org\nSubject: Level %d\nMIME-Version: 1.0\n"
            b'Content-Type: multipart/mixed; boundary="%s"\n\n'
            % (level, level, boundary)
            + b"--%s\nContent-Type: text/plain\n\nBody of level %d.\n" % (boundary, level)
            + b"--%s\nContent-Type: message/rfc822\n\n%s\n--%s--\n" % (boundary, message, boundary)
        )
    return message


def test_hundreds_of_levels_are_read_or_refused_as_corrupt_never_a_crash() -> None:
    document = extract_bytes(raw_nested_message(300))
    assert "Body of level 297." in join_blocks(document.blocks)[0]
    with pytest.raises(CorruptDocument, match="too deeply"):
        extract_bytes(raw_nested_message(1000))


def test_attachments_are_only_listed_at_depth_zero() -> None:
    document = extract_bytes(nested_message(2), max_attachment_depth=0)
    assert document.extra["attachments_not_extracted"] == ["forwarded-message-1.eml"]
    assert "Body of level 1." not in join_blocks(document.blocks)[0]


def test_an_attachment_past_the_limits_fails_the_whole_message() -> None:
    message = _message("Minutes", "Attached.")
    message.add_attachment("a line of minutes\n" * 2000, filename="minutes.txt")
    with pytest.raises(DocumentTooLarge):
        extract_bytes(message.as_bytes(), max_extracted_chars=10_000)


def test_a_message_of_50000_parts_is_refused_before_it_is_parsed() -> None:
    data = many_part_email(50_000)
    started = time.process_time()  # CPU time, which a loaded machine does not stretch
    with pytest.raises(DocumentTooLarge, match="more than 5,000 MIME parts"):
        extract_bytes(data)
    assert time.process_time() - started < 5  # the parse alone took 26 s
