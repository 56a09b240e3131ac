"""Plain text: paragraphs separated by blank lines, with their line breaks kept.

Plain text lays things out with spaces (RFC diagrams, BNF, aligned tables, poetry), so like
code it keeps its lines and the spacing inside them; what goes is the margin every line of a
paragraph shares and trailing whitespace. Form feeds (RFC page breaks) end a paragraph.
"""

from __future__ import annotations

import os
import re

from docingest.pipeline.detect.textcodec import decode_text
from docingest.pipeline.document import Block, BlockKind, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import UnsupportedFormat

_NEWLINES = re.compile(r"\r\n?|\u2028|\x85")
_PARAGRAPH_BREAK = re.compile(r"\n(?:[ \t\v]*\n)+")


def decode_document(data: bytes, *, encoding: str | None) -> tuple[str, str]:
    """Return the text of `data` with newlines normalised to `\\n`, and the encoding used.

    `encoding` is what detection found; without it (or if the bytes do not decode under it)
    the encoding is found again with `decode_text`. A leading byte-order mark is dropped.
    """
    text: str | None = None
    if encoding:
        try:
            text = data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            text = None
    if text is None or encoding is None:
        decoded = decode_text(data)
        if decoded is None:
            raise UnsupportedFormat(
                "The file could not be decoded as text in any known encoding; "
                "save it as UTF-8 and upload it again."
            )
        text, encoding = decoded.text, decoded.encoding
    return _NEWLINES.sub("\n", text.removeprefix("\ufeff")), encoding


def split_paragraphs(text: str) -> list[str]:
    """Split at blank lines and form feeds; dedent each paragraph and strip line ends."""
    text = text.replace("\f", "\n\n").replace("\u2029", "\n\n")
    paragraphs: list[str] = []
    for chunk in _PARAGRAPH_BREAK.split(text):
        # Lines blank but for other white space (NBSP, ideographic space) are dropped too.
        lines = [stripped for line in chunk.split("\n") if (stripped := line.rstrip())]
        if not lines:
            continue
        indents = [line[: len(line) - len(line.lstrip(" \t"))] for line in lines]
        margin = os.path.commonprefix(indents)
        paragraphs.append("\n".join(line[len(margin) :] for line in lines))
    return paragraphs


def extract_text(data: bytes, *, encoding: str | None) -> ExtractedDocument:
    """Extract a plain-text document: one paragraph block per blank-line-separated run."""
    text, used = decode_document(data, encoding=encoding)
    blocks = [Block(paragraph, BlockKind.PARAGRAPH) for paragraph in split_paragraphs(text)]
    return ExtractedDocument(format=DocumentFormat.TXT, blocks=blocks, extra={"encoding": used})
