"""mbox mail archives (Gmail Takeout, Thunderbird, `mbox` exports): one document whose
sections are its messages.

Each message is read as an `.eml` (`eml.message_document`: headers, body, attachments to
`max_attachment_depth`) and becomes a section headed (level 1) by its subject ("Message N"
without one), its own headings and attachments one level down; every block carries the
message's number as its `page`, so a search result says which message it came from.

Streamed: messages are found by their `From ` separator lines (a line that starts with
`From ` after a blank line, or at the start) with one regular-expression scan, then parsed
and yielded one at a time (a `BlockStream`, like a PDF's pages), so the parsed messages never
accumulate and the chunker splits each as it comes. The archive itself may be a read-only
memory map of the upload (`docingest.pipeline.isolation.child` maps a large mbox instead of reading
it); the pages already read are then dropped from this process's memory as it goes, so a
2 GB archive is never resident. `>From ` lines (mboxrd's escaping) lose one `>`.

Bounded: an archive holding more than `max_messages` messages is refused
(`document_too_large`) before any is parsed, from the separator count.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator
from dataclasses import replace

from docingest.pipeline.document import (
    Block,
    BlockKind,
    BlockStream,
    DocumentFormat,
    ExtractedDocument,
    PageReporter,
)
from docingest.pipeline.errors import DocumentTooLarge, PermanentError
from docingest.pipeline.extract.eml import AttachmentReader, extract_eml

_SEPARATOR = re.compile(rb"(?:\A|\n\r?\n)From [^\n]*\n")
_ESCAPED_FROM = re.compile(rb"^>(>*From )", re.M)
_MAX_HEADING_LEVEL = 6
_RELEASE_BYTES = 64 * 1024 * 1024
"""How far the scan goes in a mapped archive before the pages behind it are released."""
_OVERLAP = 64 * 1024
"""How far past its window a separator found in it may run (a `From ` line is ~100 bytes)."""


def iter_mbox(
    data: bytes | mmap.mmap,
    *,
    max_messages: int,
    attachments: AttachmentReader | None,
    on_page: PageReporter | None = None,
) -> BlockStream:
    """The archive's messages, one batch of blocks each; then the document (no blocks)."""
    total = count_messages(data, max_messages=max_messages)
    released = 0
    number = 0
    skipped = 0
    for number, (start, end) in enumerate(_spans(data), 1):
        message = _ESCAPED_FROM.sub(rb"\1", data[start:end])
        blocks = _message_blocks(message, number, attachments)
        if blocks is None:
            skipped += 1
        elif blocks:
            yield blocks
        if on_page is not None:
            on_page(number, total)
        if isinstance(data, mmap.mmap) and end - released >= _RELEASE_BYTES:
            released = _release(data, released, end)
    extra = {"messages": number}
    if skipped:
        extra["messages_not_read"] = skipped
    return ExtractedDocument(format=DocumentFormat.MBOX, blocks=[], pages=number, extra=extra)


def count_messages(data: bytes | mmap.mmap, *, max_messages: int) -> int:
    """How many messages the archive holds; `DocumentTooLarge` past `max_messages`."""
    count = 0
    for _ in _separators(data, release=True):
        count += 1
        if count > max_messages:
            raise DocumentTooLarge(
                f"The mbox archive holds more than {max_messages:,} messages (the server's "
                "max_mbox_messages, at most its max_chunks_per_document); split it into "
                "smaller archives."
            )
    return count


def _spans(data: bytes | mmap.mmap) -> Iterator[tuple[int, int]]:
    """(start, end) of each message's bytes, its separator line left out."""
    start: int | None = None
    for match in _separators(data, release=False):
        if start is not None:
            yield start, match.start() + 1
        start = match.end()
    if start is not None:
        yield start, len(data)


def _separators(data: bytes | mmap.mmap, *, release: bool) -> Iterator[re.Match[bytes]]:
    """The separator lines, found a window at a time; with `release`, a mapped archive's
    pages are dropped behind each window (counting touches the whole file)."""
    size, start = len(data), 0
    while start < size:
        end = min(size, start + _RELEASE_BYTES)
        for match in _SEPARATOR.finditer(data, start, min(size, end + _OVERLAP)):
            if match.start() >= end:
                break
            yield match
        if release and isinstance(data, mmap.mmap):
            _release(data, start, end)
        start = end


def _message_blocks(
    message: bytes, number: int, attachments: AttachmentReader | None
) -> list[Block] | None:
    """The message as a section on page `number`; None when it cannot be read (an
    encrypted or damaged message is skipped and counted, not the archive's failure)."""
    try:
        document = extract_eml(message, encoding=None, attachments=attachments)
    except DocumentTooLarge:
        raise
    except PermanentError:
        return None
    blocks = document.blocks
    if blocks and blocks[0].kind is BlockKind.HEADING and blocks[0].text == document.title:
        heading, rest = blocks[0], blocks[1:]
    else:
        heading, rest = Block(f"Message {number}", BlockKind.HEADING, level=1), blocks
    if not any(block.text.strip() for block in rest):
        if heading.text == document.title:  # only a subject: it is the text, as for a slide
            return [
                Block(f"Message {number}", BlockKind.HEADING, 1, number),
                Block(heading.text, page=number),
            ]
        return []  # an empty message: nothing to find it by
    return [replace(heading, page=number), *(_under(block, number) for block in rest)]


def _under(block: Block, number: int) -> Block:
    """A block of a message's section: headings one level down, on page `number`."""
    if block.kind is BlockKind.HEADING:
        return replace(block, level=min(block.level + 1, _MAX_HEADING_LEVEL), page=number)
    return replace(block, page=number)


def _release(data: mmap.mmap, released: int, end: int) -> int:
    """Drop the mapped pages before `end` from memory (they are the file's: nothing lost)."""
    page = mmap.PAGESIZE
    upto = (end // page) * page
    if upto > released and hasattr(data, "madvise"):
        data.madvise(mmap.MADV_DONTNEED, released, upto - released)
    return max(released, upto)
