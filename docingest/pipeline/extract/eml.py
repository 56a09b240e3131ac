"""E-mail (RFC 822/MIME `.eml`): headers as metadata, the body, then the attachments.

The standard library's `email` parses the message (policy `default`: decoded headers, RFC
2047 words, charsets). The subject heads the body as a level-1 heading; the body is the
plain-text part, or the HTML part through the HTML extractor when there is no plain one.
Each attachment in a supported format is extracted by the caller's `AttachmentReader` (the
same detection and extractors, so the same limits) and becomes a level-1 section headed by
its file name, its own headings one level down; others are listed by name in
`extra["attachments_not_extracted"]`. A forwarded message (`message/rfc822`) is read here,
as parsed, with the reader one level deeper; at the caller's depth limit there is no reader
(None) and everything further down is listed by name.

An encrypted message (PGP/MIME `multipart/encrypted`, S/MIME enveloped data) cannot be read
without its key: `encrypted_document`.
"""

from __future__ import annotations

import email
import email.utils
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage, MIMEPart
from typing import Any, NoReturn, Protocol

from docingest.pipeline.document import Block, BlockKind, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import (
    CorruptDocument,
    DocumentTooLarge,
    EncryptedDocument,
    PermanentError,
)
from docingest.pipeline.extract.html import extract_html
from docingest.pipeline.extract.text import split_paragraphs


class AttachmentReader(Protocol):
    """How the caller extracts attachments, and how deep it goes."""

    def read(self, blob: bytes, filename: str) -> ExtractedDocument:
        """Extract an attachment's bytes given its file name; raise a `PermanentError` if
        it cannot be."""

    def deeper(self) -> AttachmentReader | None:
        """The reader for attachments one level further down; None at the depth limit."""


_HEADERS = ("from", "to", "cc", "subject", "date", "message-id")
_MAX_HEADING_LEVEL = 6

MAX_MIME_PARTS = 5000
"""Most MIME parts a message may have, counted before any part's headers are read: each part
costs milliseconds of header parsing and a section of its own, so 50,000 tiny parts in a
5 MB message took minutes and thousands of chunks (BENCHMARKS.md, "Chunks per document");
real messages have a handful. Counted twice: in the raw bytes before parsing (the standard
library's parser alone took 26 s over those 50,000), and exactly in the parsed tree."""

_BOUNDARY = re.compile(rb'boundary\s*=\s*"?([^";\r\n]+)"?', re.IGNORECASE)
_DASH_LINE = re.compile(rb"^--([^\r\n]*?)(?:--)?[ \t]*\r?$", re.MULTILINE)


def extract_eml(
    data: bytes, *, encoding: str | None, attachments: AttachmentReader | None
) -> ExtractedDocument:
    """Extract the message in `data`; `encoding` is set when the whole file is UTF-16/32."""
    if _boundary_lines(data) > MAX_MIME_PARTS:
        _too_many_parts()
    try:
        message = _parse(data, encoding)
        _refuse_too_many_parts(message)
        return message_document(message, attachments)
    except RecursionError as exc:  # the standard library's parser recurses per nested message
        raise CorruptDocument(
            "The e-mail nests messages inside messages too deeply (hundreds of levels) to parse."
        ) from exc


def message_document(
    message: EmailMessage, attachments: AttachmentReader | None
) -> ExtractedDocument:
    """One parsed message as a document (`extract_eml` after parsing; mbox per message)."""
    _refuse_encrypted(message)
    headers = {name: _header(message, name) for name in _HEADERS}
    blocks: list[Block] = []
    if headers["subject"]:
        blocks.append(Block(headers["subject"], BlockKind.HEADING, level=1))
    blocks += _body_blocks(message)
    extra: dict[str, Any] = {
        key.replace("-", "_"): value for key, value in headers.items() if value
    }
    extracted, skipped = [], []
    for name, part in _attachments(message):
        section = _attachment_blocks(part, name, attachments)
        if section is None:
            skipped.append(name)
        else:
            extracted.append(name)
            blocks += section
    if extracted:
        extra["attachments"] = extracted
    if skipped:
        extra["attachments_not_extracted"] = skipped
    return ExtractedDocument(
        format=DocumentFormat.EML,
        blocks=blocks,
        title=headers["subject"] or None,
        author=headers["from"] or None,
        created=_date(headers["date"]),
        extra=extra,
    )


def _parse(data: bytes, encoding: str | None) -> EmailMessage:
    if encoding and not encoding.startswith("utf-8"):  # UTF-16/32: not bytes email can read
        text = data.decode(encoding, errors="replace").lstrip("\ufeff")
        message = email.message_from_string(text, policy=policy.default)
    else:
        message = email.message_from_bytes(data, policy=policy.default)
    assert isinstance(message, EmailMessage)  # policy.default builds EmailMessage objects
    return message


def _boundary_lines(data: bytes) -> int:
    """About how many MIME parts `data` holds, from its raw bytes: the lines that open with a
    declared boundary (each part's, plus one closing line per multipart)."""
    boundaries = set(_BOUNDARY.findall(data))
    if len(boundaries) > MAX_MIME_PARTS:  # a multipart is a part too
        return len(boundaries)
    lines = sum(1 for token in _DASH_LINE.findall(data) if token in boundaries)
    return lines - len(boundaries)


def _refuse_too_many_parts(message: EmailMessage) -> None:
    parts = 0
    for _ in message.walk():  # the parsed tree only: no header is decoded
        parts += 1
        if parts > MAX_MIME_PARTS:
            _too_many_parts()


def _too_many_parts() -> NoReturn:
    raise DocumentTooLarge(
        f"The e-mail has more than {MAX_MIME_PARTS:,} MIME parts; split it or send its "
        "attachments as files of their own."
    )


def _refuse_encrypted(message: EmailMessage) -> None:
    content_type = message.get_content_type()
    smime = content_type in ("application/pkcs7-mime", "application/x-pkcs7-mime")
    if content_type == "multipart/encrypted" or (
        smime and message.get_param("smime-type") in (None, "enveloped-data")
    ):
        raise EncryptedDocument(
            "The e-mail is encrypted (PGP/MIME or S/MIME); decrypt it in your mail client, "
            "save it as .eml again and upload that."
        )


def _header(message: EmailMessage, name: str) -> str:
    """A header's decoded value on one line; "" when absent or unparseable."""
    try:
        value = message.get(name)
    except Exception:  # email's header parser has many failure modes; a header is optional
        return ""
    return " ".join(str(value).split()) if value is not None else ""


def _date(value: str) -> datetime | None:
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _body_blocks(message: EmailMessage) -> list[Block]:
    body = message.get_body(preferencelist=("plain", "html"))
    if body is None:
        return []
    text = _text(body)
    if body.get_content_subtype() == "html":
        document = extract_html(text.encode("utf-8"), encoding="utf-8")
        return [demoted(block) for block in document.blocks]
    return [Block(paragraph) for paragraph in split_paragraphs(text.replace("\r\n", "\n"))]


def _text(part: MIMEPart) -> str:
    """A text part's content; with an unknown or broken charset, UTF-8 with replacements."""
    try:
        content = part.get_content()
    except (LookupError, ValueError, UnicodeError, AssertionError):
        content = None
    if isinstance(content, str):
        return content
    payload = part.get_payload(decode=True)
    return payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else ""


def _attachments(message: EmailMessage) -> Iterator[tuple[str, EmailMessage]]:
    """(file name, part) of each attachment; unnamed ones get a name from their type."""
    for number, part in enumerate(message.iter_attachments(), 1):
        assert isinstance(part, EmailMessage)
        name = part.get_filename()
        if not name and part.get_content_type() == "message/rfc822":
            name = f"forwarded-message-{number}.eml"
        yield " ".join((name or f"attachment-{number}").split()), part


def _attachment_blocks(
    part: EmailMessage, name: str, reader: AttachmentReader | None
) -> list[Block] | None:
    """The attachment as a section headed by its name, or None when it is not extracted."""
    if reader is None:
        return None
    try:
        document = _attachment_document(part, name, reader)
    except DocumentTooLarge:
        raise  # the limits hold for the whole upload, attachments included
    except PermanentError:  # unsupported, encrypted, damaged, empty: listed by name
        return None
    return attachment_section(name, document)


def attachment_section(name: str, document: ExtractedDocument | None) -> list[Block] | None:
    """An extracted attachment as a level-1 section headed by `name`, its own headings one
    level down; None when it holds no text."""
    blocks = [demoted(block) for block in document.blocks if block.text] if document else []
    if not blocks:
        return None
    return [Block(name, BlockKind.HEADING, level=1), *blocks]


def _attachment_document(
    part: EmailMessage, name: str, reader: AttachmentReader
) -> ExtractedDocument | None:
    """Extract one attachment; a forwarded message is read as parsed, never re-serialised
    (writing a message nested 150 deep back to bytes exceeds Python's recursion limit)."""
    if part.get_content_type() == "message/rfc822":
        inner = part.get_content()
        return message_document(inner, reader.deeper()) if isinstance(inner, EmailMessage) else None
    payload = part.get_payload(decode=True)
    return reader.read(payload, name) if isinstance(payload, bytes) and payload else None


def demoted(block: Block) -> Block:
    """A block of a section headed one level up: headings go one down; no pages."""
    if block.kind is BlockKind.HEADING:
        return replace(block, level=min(block.level + 1, _MAX_HEADING_LEVEL), page=None)
    return replace(block, page=None) if block.page is not None else block
