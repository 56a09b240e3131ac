"""Recognise two record formats inside decoded text: an RFC 822 e-mail and CSV/TSV.

Both are plain text, so `detect` asks these before weighing Markdown against prose:
- an e-mail starts with a header block (`Name: value` lines, folded lines indented) naming
  at least two of the headers every mail client writes, one of them an originator field,
  after an mbox `From ` separator line if there is one (a message saved from Gmail or
  Thunderbird starts with one); an mbox archive is such a file with a second separator
  followed by headers (`is_mbox`);
- CSV is what `csv.Sniffer` finds a dialect for (comma, semicolon or tab) and whose rows,
  read with that dialect, all have the same number (two or more) of fields.
"""

from __future__ import annotations

import csv
import io
import mmap
import re

_HEADER_LINE = re.compile(r"([!-9;-~]{1,76}):")
_MAIL_HEADERS = frozenset(
    "from to cc subject date message-id mime-version received return-path reply-to sender "
    "delivered-to in-reply-to references content-type x-mailer".split()
)
_ORIGINATOR = frozenset(("from", "sender", "received", "return-path", "message-id"))
_HEADER_SAMPLE_LINES = 200

_CSV_SAMPLE_CHARS = 65_536
_CSV_SAMPLE_ROWS = 200
_DELIMITERS = ",;\t"


_MBOX_SEPARATOR = re.compile(rb"\n\r?\nFrom [^\r\n]*\r?\n[!-9;-~]{1,76}:")
"""A later message of an mbox: a blank line, the `From ` separator, then a header line."""


def starts_with_separator(text: str) -> bool:
    """True when `text` opens with an mbox `From ` separator line."""
    return text.lstrip("\ufeff").startswith("From ")


def is_mbox(data: bytes | mmap.mmap) -> bool:
    """True when `data`, which opens with a separator, holds a second message: one scan of
    the bytes, linear in their length."""
    return _MBOX_SEPARATOR.search(data) is not None


def looks_like_email(text: str) -> bool:
    """True when `text` opens with an RFC 822 header block of a real message, after an mbox
    separator line if there is one."""
    names: set[str] = set()
    text = text.lstrip("\ufeff")
    if text.startswith("From "):
        text = text.partition("\n")[2]
    for line in text.split("\n", _HEADER_SAMPLE_LINES)[:_HEADER_SAMPLE_LINES]:
        line = line.rstrip("\r")
        if not line:
            break
        if line[0] in " \t" and names:  # a folded continuation of the previous header
            continue
        match = _HEADER_LINE.match(line)
        if match is None:
            return False
        names.add(match.group(1).lower())
    known = names & _MAIL_HEADERS
    return len(known) >= 2 and bool(known & _ORIGINATOR)


def csv_dialect(text: str, *, min_rows: int) -> type[csv.Dialect] | None:
    """The dialect `text` is written in if it is delimited records, else None.

    `min_rows` is how many records of the sample must agree: fewer when a `.csv` name or
    content type backs the bytes up.
    """
    sample = text[:_CSV_SAMPLE_CHARS]
    if len(text) > len(sample):  # drop the record cut in two
        sample = sample[: sample.rfind("\n") + 1]
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=_DELIMITERS)
    except csv.Error:
        return None
    if dialect.delimiter not in _DELIMITERS:
        return None
    widths: list[int] = []
    try:
        for row in csv.reader(io.StringIO(sample), dialect):
            if any(cell.strip() for cell in row):
                widths.append(len(row))
            if len(widths) >= _CSV_SAMPLE_ROWS:
                break
    except csv.Error:
        return None
    if len(widths) < min_rows or widths[0] < 2:
        return None
    return dialect if all(width == widths[0] for width in widths) else None
