"""Outlook `.msg` (MS-OXMSG): headers as metadata, the body, then the attachments, as `eml`.

A `.msg` is an OLE2 compound file of MAPI properties: fixed-size ones in each storage's
`__properties_version1.0` stream, the others in `__substg1.0_<id><type>` streams, recipients
and attachments in storages of their own, an attached message as a storage holding a message.
A small reader over olefile (`detect/ole2.py`, BSD) rather than `extract-msg`, the well-known
library, which is GPL-3.0 (this project is Apache-2.0), and rather than Debian's `msgconvert`
(Perl, MSG to EML), which would add a Perl stack to the image for the same few properties.

As for `eml`: the subject heads the body as a level-1 heading; from, to, cc, date and the
message id are metadata; the body is the plain text, else the HTML through the HTML
extractor, else the RTF (decompressed here, MS-OXRTFCP, then read by the RTF extractor);
each attachment in a supported format is extracted by the caller's `AttachmentReader` and
becomes a level-1 section headed by its file name, an attached message is read here one
level deeper, and at the depth limit (no reader) everything further down is listed by name.
"""

from __future__ import annotations

import email.utils
import re
import struct
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from docingest.pipeline.detect.ole2 import open_ole2, read_stream
from docingest.pipeline.document import Block, BlockKind, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import DocumentTooLarge, PermanentError
from docingest.pipeline.extract.eml import AttachmentReader, attachment_section, demoted
from docingest.pipeline.extract.html import extract_html
from docingest.pipeline.extract.lzfu import decompress_rtf
from docingest.pipeline.extract.text import split_paragraphs

RtfReader = Callable[[bytes], ExtractedDocument]
"""Reads an RTF body (the RTF extractor, under the caller's limits)."""

MAX_ATTACHMENTS = 5000
"""Most attachments one message may list, as `eml.MAX_MIME_PARTS` for MIME parts."""

_LABEL = "Outlook message"
_PROPERTIES = "__properties_version1.0"
_UNICODE, _STRING8, _BINARY, _SYSTIME = 0x001F, 0x001E, 0x0102, 0x0040
_SUBJECT, _SENDER_NAME, _SENDER_EMAIL, _SENDER_SMTP = 0x0037, 0x0C1A, 0x0C1F, 0x5D01
_TO, _CC, _MESSAGE_ID, _HEADERS = 0x0E04, 0x0E03, 0x1035, 0x007D
_BODY, _HTML, _RTF = 0x1000, 0x1013, 0x1009
_SUBMIT_TIME, _DELIVERY_TIME, _CODEPAGE, _INTERNET_CODEPAGE = 0x0039, 0x0E06, 0x3FFD, 0x3FDE
_LONG_NAME, _SHORT_NAME, _DISPLAY_NAME, _ATTACH_DATA = 0x3707, 0x3704, 0x3001, 0x3701
_EMBEDDED = "__substg1.0_3701000D"
_ATTACHMENT = re.compile(r"__attach_version1\.0_#[0-9A-Fa-f]{8}\Z")
_FILETIME_EPOCH = datetime(1601, 1, 1, tzinfo=UTC)
_DATE_HEADER = re.compile(r"^Date:[ \t]*(.+(?:\r?\n[ \t].+)*)", re.M | re.I)


def extract_msg(
    data: bytes, *, attachments: AttachmentReader | None, rtf: RtfReader | None
) -> ExtractedDocument:
    """Extract the Outlook message in `data`."""
    with open_ole2(data, label=_LABEL) as ole:
        return _Message(ole, [], top=True).document(attachments, rtf)


class _Message:
    """The message in the storage at `path` (the root: [])."""

    def __init__(self, ole: Any, path: list[str], *, top: bool) -> None:
        self._ole, self._path = ole, path
        fixed = read_stream(ole, [*path, _PROPERTIES], label=_LABEL) or b""
        self._fixed = _fixed_properties(fixed, header=32 if top else 24)
        codepage = self._fixed.get(_CODEPAGE) or self._fixed.get(_INTERNET_CODEPAGE)
        self._codepage = f"cp{codepage}" if isinstance(codepage, int) else "cp1252"

    def document(self, reader: AttachmentReader | None, rtf: RtfReader | None) -> ExtractedDocument:
        subject = _one_line(self._string(_SUBJECT))
        sender = _address(self._string(_SENDER_NAME), self._sender_email())
        extra: dict[str, Any] = {}
        for key, value in (
            ("from", sender), ("to", _one_line(self._string(_TO))),
            ("cc", _one_line(self._string(_CC))), ("subject", subject),
            ("message_id", _one_line(self._string(_MESSAGE_ID))),
        ):  # fmt: skip
            if value:
                extra[key] = value
        created = self._date()
        if created is not None:
            extra["date"] = email.utils.format_datetime(created)
        blocks = [Block(subject, BlockKind.HEADING, level=1)] if subject else []
        blocks += self._body(rtf)
        extracted: list[str] = []
        skipped: list[str] = []
        for name, section in self._attachments(reader, rtf):
            (extracted if section else skipped).append(name)
            blocks += section or []
        if extracted:
            extra["attachments"] = extracted
        if skipped:
            extra["attachments_not_extracted"] = skipped
        return ExtractedDocument(
            format=DocumentFormat.MSG,
            blocks=blocks,
            title=subject or None,
            author=sender or None,
            created=created,
            extra=extra,
        )

    def _body(self, rtf: RtfReader | None) -> list[Block]:
        if text := self._string(_BODY):
            return [Block(p) for p in split_paragraphs(text.replace("\r\n", "\n"))]
        html = self._stream(_HTML, _BINARY) or self._stream(_HTML, _UNICODE)
        if html:
            encoding = (
                "utf-16-le"
                if self._exists(_HTML, _UNICODE) and not self._exists(_HTML, _BINARY)
                else self._codepage
            )
            document = extract_html(html.decode(encoding, "replace").encode(), encoding="utf-8")
            return [demoted(block) for block in document.blocks]
        compressed = self._stream(_RTF, _BINARY)
        if compressed and rtf is not None:
            try:
                document = rtf(decompress_rtf(compressed))
            except DocumentTooLarge:
                raise
            except PermanentError:
                return []
            return [demoted(block) for block in document.blocks]
        return []

    def _attachments(
        self, reader: AttachmentReader | None, rtf: RtfReader | None
    ) -> list[tuple[str, list[Block] | None]]:
        storages = sorted(
            entry.name for entry in self._storage().kids if _ATTACHMENT.match(entry.name)
        )
        if len(storages) > MAX_ATTACHMENTS:
            raise DocumentTooLarge(
                f"The Outlook message has more than {MAX_ATTACHMENTS:,} attachments."
            )
        out = []
        for number, storage in enumerate(storages, 1):
            path = [*self._path, storage]
            attachment = _Attachment(self._ole, path, self._codepage)
            name = attachment.name() or f"attachment-{number}"
            out.append((name, attachment.section(name, reader, rtf)))
        return out

    def _storage(self) -> Any:
        entry = self._ole.root
        for name in self._path:
            entry = next(kid for kid in entry.kids if kid.name == name)
        return entry

    def _sender_email(self) -> str:
        smtp = self._string(_SENDER_SMTP)
        sender = self._string(_SENDER_EMAIL)
        return smtp or (sender if "@" in sender else "")

    def _date(self) -> datetime | None:
        for tag in (_SUBMIT_TIME, _DELIVERY_TIME):
            value = self._fixed.get(tag)
            if isinstance(value, datetime):
                return value
        match = _DATE_HEADER.search(self._string(_HEADERS))
        if match is None:
            return None
        try:
            moment = email.utils.parsedate_to_datetime(" ".join(match.group(1).split()))
        except (TypeError, ValueError, IndexError):
            return None
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)

    def _string(self, tag: int) -> str:
        if (raw := self._stream(tag, _UNICODE)) is not None:
            return raw.decode("utf-16-le", "replace").rstrip("\x00")
        if (raw := self._stream(tag, _STRING8)) is not None:
            return _decode(raw, self._codepage).rstrip("\x00")
        return ""

    def _exists(self, tag: int, kind: int) -> bool:
        return bool(self._ole.exists([*self._path, _stream_name(tag, kind)]))

    def _stream(self, tag: int, kind: int) -> bytes | None:
        return read_stream(self._ole, [*self._path, _stream_name(tag, kind)], label=_LABEL)


class _Attachment(_Message):
    def __init__(self, ole: Any, path: list[str], codepage: str) -> None:
        self._ole, self._path, self._codepage = ole, path, codepage
        self._fixed = {}

    def name(self) -> str:
        for tag in (_LONG_NAME, _SHORT_NAME, _DISPLAY_NAME):
            if name := _one_line(self._string(tag)):
                return name
        return ""

    def section(
        self, name: str, reader: AttachmentReader | None, rtf: RtfReader | None
    ) -> list[Block] | None:
        if reader is None:
            return None
        try:
            document: ExtractedDocument | None
            if self._ole.exists([*self._path, _EMBEDDED]):  # an attached message
                inner = _Message(self._ole, [*self._path, _EMBEDDED], top=False)
                document = inner.document(reader.deeper(), rtf)
            else:
                payload = self._stream(_ATTACH_DATA, _BINARY)
                document = reader.read(payload, name) if payload else None
        except DocumentTooLarge:
            raise  # the limits hold for the whole upload, attachments included
        except PermanentError:  # unsupported, encrypted, damaged, empty: listed by name
            return None
        return attachment_section(name, document)


def _stream_name(tag: int, kind: int) -> str:
    return f"__substg1.0_{tag:04X}{kind:04X}"


def _fixed_properties(stream: bytes, *, header: int) -> dict[int, Any]:
    """Fixed-size properties: integers (the code pages) and times (FILETIME, UTC)."""
    properties: dict[int, Any] = {}
    for offset in range(header, len(stream) - 15, 16):
        kind, tag = struct.unpack_from("<HH", stream, offset)
        if kind == _SYSTIME:
            (ticks,) = struct.unpack_from("<Q", stream, offset + 8)
            try:
                properties[tag] = _FILETIME_EPOCH + timedelta(microseconds=ticks // 10)
            except OverflowError:
                continue
        elif kind == 0x0003:  # PT_LONG
            properties[tag] = struct.unpack_from("<i", stream, offset + 8)[0]
    return properties


def _decode(raw: bytes, codepage: str) -> str:
    try:
        return raw.decode(codepage, "replace")
    except LookupError:
        return raw.decode("cp1252", "replace")


def _address(name: str, address: str) -> str:
    name, address = _one_line(name), _one_line(address)
    if name and address and name != address:
        return email.utils.formataddr((name, address))
    return address or name


def _one_line(text: str) -> str:
    return " ".join(text.split())
