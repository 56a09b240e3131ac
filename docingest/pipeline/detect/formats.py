"""Tell which supported format a file is in, from its bytes.

The bytes decide; a file name or content type is only a tie-breaker for text that could be
read two ways (prose in a `.md` file, a few `#` lines in a `.txt` file, records in a `.txt`
file). Order of evidence: container magic (PDF, ZIP packages by their directory, OLE2; see
`detect_package`), image magic (PNG, JPEG, TIFF, WebP: read by OCR), other known binary magic,
then the decoded text: an RFC 822 header block (e-mail), markup (HTML), delimited records
(CSV, see `sniff`), then its structure (Markdown versus plain text).

`Detection.encoding` is what `textcodec.decode_text` found for Markdown and text. For HTML
it is set only when the file starts with a byte-order mark: otherwise the HTML extractor
decodes with the document's own `<meta charset>` as a hint, which a BOM must override
(a UTF-16 page may still say `charset=utf-8`).
"""

from __future__ import annotations

import mmap
import re
from pathlib import PurePath

from docingest.pipeline.detect.package import SUPPORTED as _SUPPORTED
from docingest.pipeline.detect.package import detect_ole2, detect_zip
from docingest.pipeline.detect.sniff import (
    csv_dialect,
    is_mbox,
    looks_like_email,
    starts_with_separator,
)
from docingest.pipeline.detect.textcodec import control_ratio, decode_text
from docingest.pipeline.document import Detection, DocumentFormat
from docingest.pipeline.errors import EmptyDocument, UnsupportedFormat

# Images read through OCR (`extract/image.py`), by their magic numbers.
_IMAGE_MAGICS = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*")

# (offset, magic, what it is). A table rather than `filetype`/`puremagic`: we only need to
# name the common things people upload by mistake; everything else that is binary is caught
# by the control-character test on the decoded text.
_MAGIC: tuple[tuple[int, bytes, str], ...] = (
    (0, b"GIF87a", "a GIF image"),
    (0, b"GIF89a", "a GIF image"),
    (0, b"\x00\x00\x01\x00", "an icon image (ICO)"),
    (0, b"\x7fELF", "an ELF executable"),
    (0, b"\xfe\xed\xfa\xce", "a Mach-O executable"),
    (0, b"\xfe\xed\xfa\xcf", "a Mach-O executable"),
    (0, b"\xce\xfa\xed\xfe", "a Mach-O executable"),
    (0, b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
    (0, b"\xca\xfe\xba\xbe", "a Mach-O universal binary or Java class file"),
    (0, b"\x00asm", "a WebAssembly module"),
    (0, b"\x1f\x8b", "a gzip archive"),
    (0, b"\xfd7zXZ\x00", "an xz archive"),
    (0, b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (0, b"Rar!\x1a\x07", "a RAR archive"),
    (0, b"\x28\xb5\x2f\xfd", "a Zstandard archive"),
    (0, b"SQLite format 3\x00", "an SQLite database"),
    (0, b"ID3\x02", "an MP3 audio file"),
    (0, b"ID3\x03", "an MP3 audio file"),
    (0, b"ID3\x04", "an MP3 audio file"),
    (0, b"\xff\xfb", "an MP3 audio file"),
    (0, b"\xff\xf3", "an MP3 audio file"),
    (0, b"OggS\x00", "an Ogg media file"),
    (0, b"fLaC", "a FLAC audio file"),
    (0, b"\x1a\x45\xdf\xa3", "a Matroska/WebM video"),
    (0, b"wOFF", "a web font (WOFF)"),
    (0, b"wOF2", "a web font (WOFF2)"),
    (0, b"%!PS", "a PostScript file"),
)
_RIFF = {b"WAVE": "a WAV audio file", b"AVI ": "an AVI video"}
_BZIP2 = re.compile(rb"\ABZh[1-9]1AY&SY")
_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")

_EXTENSIONS = {
    ".md": DocumentFormat.MARKDOWN,
    ".markdown": DocumentFormat.MARKDOWN,
    ".mdx": DocumentFormat.MARKDOWN,
    ".mkd": DocumentFormat.MARKDOWN,
    ".txt": DocumentFormat.TXT,
    ".text": DocumentFormat.TXT,
    ".rst": DocumentFormat.TXT,
    ".html": DocumentFormat.HTML,
    ".htm": DocumentFormat.HTML,
    ".xhtml": DocumentFormat.HTML,
    ".csv": DocumentFormat.CSV,
    ".tsv": DocumentFormat.CSV,
    ".tab": DocumentFormat.CSV,
    ".eml": DocumentFormat.EML,
    ".mbox": DocumentFormat.MBOX,
    ".mbx": DocumentFormat.MBOX,
}
_CONTENT_TYPES = {
    "text/markdown": DocumentFormat.MARKDOWN,
    "text/x-markdown": DocumentFormat.MARKDOWN,
    "text/plain": DocumentFormat.TXT,
    "text/html": DocumentFormat.HTML,
    "application/xhtml+xml": DocumentFormat.HTML,
    "text/csv": DocumentFormat.CSV,
    "text/tab-separated-values": DocumentFormat.CSV,
    "message/rfc822": DocumentFormat.EML,
    "application/mbox": DocumentFormat.MBOX,
}
# Records agreeing in width before text is taken for CSV: fewer when the name says CSV.
_CSV_ROWS_HINTED = 1
_CSV_ROWS_UNHINTED = 3

# --- evidence in decoded text --------------------------------------------------------------
_SAMPLE_CHARS = 262_144  # structure is judged on the first 256 Ki characters
_MAPPED_HEAD_BYTES = 4 * 1024 * 1024  # what a mapped upload is detected from
_HTML_PROLOGUE = re.compile(r"\s*(?:<\?xml[^>]*>|<!--.*?-->|<!doctype\b[^>]*>)", re.I | re.S)
_HTML_ROOT = re.compile(r"\s*<(?:html|head|body)[\s>/]", re.I)
_SVG_DOCTYPE = re.compile(r"\s*<!doctype\s+svg\b", re.I)
_SVG_ROOT = re.compile(r"\s*<svg[\s>/]", re.I)
_HTML_TAG = re.compile(
    r"</?(?:html|head|body|p|div|span|a|img|table|thead|tbody|tr|td|th|pre|code|ul|ol|li|"
    r"h[1-6]|br|hr|blockquote|dl|dt|dd|section|article|nav|header|footer|main|aside|form|"
    r"input|script|style|meta|link|title|b|i|em|strong|font|center|details|summary|sup|sub|"
    r"figure|picture|source)\b[^<>]*>",
    re.I,
)
_HTML_BLOCK = re.compile(
    r"<(?:p|div|table|tr|td|pre|ul|ol|li|h[1-6]|blockquote|dl|section|article|br)\b[^<>]*>",
    re.I,
)
_WHITESPACE = re.compile(r"\s+")
_BLANK = re.compile(rb"\s*\Z")  # stops at the first other byte: no copy of a large upload

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_ATX = re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.M)
# Linear-time patterns: every `findall` below runs on up to 256 Ki characters of untrusted
# text, so no pattern may rescan a run from each of its positions. The lookahead tests a line
# for a non-space once (`[^\n]*\S[^\n]*` backtracks quadratically on one long line), and
# link text and URL stop at the next bracket (`[^\]\n]+` rescans a line of `[[[[` from each).
_SETEXT = re.compile(r"^(?=[^\n]*\S)[^\n]*\n {0,3}(?:=+|-+)[ \t]*$", re.M)
_LIST_ITEM = re.compile(r"^ {0,8}(?:[-*+]|\d{1,3}[.)])[ \t]+\S", re.M)
_LINK = re.compile(r"!?\[[^\[\]\n]+\]\([^)\[\s]+(?:[ \t]+\"[^\"\n]*\")?\)")
_LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]\n]+\]:[ \t]*\S+", re.M)
_FENCE = re.compile(r"^ {0,3}(?:```|~~~)", re.M)
_EMPHASIS = re.compile(r"(?<![\w*])\*\*[^*\n]+\*\*(?![\w*])|(?<![\w`:])`[^`\n]+`(?![\w`])")
_TABLE_RULE = re.compile(
    r"^ {0,3}\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)+\|?[ \t]*$", re.M
)
# reStructuredText, which shares setext headings, lists and `**bold**` with Markdown.
_RST = re.compile(r"^[ \t]*\.\. (?:[\w:-]+::|_[^\n:]+:|\|)|:[a-z]+:`|::$", re.M)

_CONFIDENT_MARKDOWN = 0.15  # evidence per line above which structure alone decides
_LIKELY_MARKDOWN = 0.08  # with no hint, Markdown from here up if it has some strong marker
_HTML_DENSITY = 0.25  # share of non-space characters inside HTML tags for a fragment


def detect(
    data: bytes | mmap.mmap, *, filename: str | None = None, content_type: str | None = None
) -> Detection:
    """Return the format of `data` (and the encoding of text), or raise why it cannot be used.

    Raises `EmptyDocument`, `EncryptedDocument` (password-protected Office files) and
    `UnsupportedFormat` naming what the file is when it can tell. `data` is a memory map
    only for a large file that starts like an mbox archive (`docingest.pipeline.isolation.child`):
    its head decides, and only an mbox is read from the map (its caller copies the rest).
    """
    if isinstance(data, mmap.mmap):
        head = data[:_MAPPED_HEAD_BYTES]
        detection = detect(head, filename=filename, content_type=content_type)
        if detection.format is DocumentFormat.EML and is_mbox(data):
            return Detection(DocumentFormat.MBOX, detection.encoding)
        return detection
    if _BLANK.match(data):
        size = "0 bytes" if not data else "only whitespace"
        raise EmptyDocument(f"The file is empty ({size}); upload a document that has content.")
    if data.startswith(b"%PDF-"):
        return Detection(DocumentFormat.PDF)
    if data.startswith(_ZIP_MAGICS):
        return detect_zip(data, suffix=PurePath(filename or "").suffix.lower())
    if data.startswith(_OLE2):
        return detect_ole2(data)
    if data.startswith(b"{\\rtf"):
        return Detection(DocumentFormat.RTF)
    if data.startswith(_IMAGE_MAGICS) or (data.startswith(b"RIFF") and data[8:12] == b"WEBP"):
        return Detection(DocumentFormat.IMAGE)
    if (kind := _binary_kind(data)) is not None:
        raise UnsupportedFormat(f"This file is {kind}, which is not supported; {_SUPPORTED}.")
    # Readers accept junk before the header; checked after the magics so that a ZIP holding
    # a stored PDF is not taken for one, and with a structure token so that a text which
    # merely quotes "%PDF-" is not either.
    if b"%PDF-" in data[:1024] and (b"endobj" in data or b"startxref" in data):
        return Detection(DocumentFormat.PDF)
    return _detect_text(data, _hint(filename, content_type))


_NAMED_FORMATS = {
    **_EXTENSIONS,
    ".pdf": DocumentFormat.PDF,
    ".docx": DocumentFormat.DOCX,
    ".pptx": DocumentFormat.PPTX,
    ".xlsx": DocumentFormat.XLSX,
    ".epub": DocumentFormat.EPUB,
    ".odt": DocumentFormat.ODT,
    ".ods": DocumentFormat.ODS,
    ".odp": DocumentFormat.ODP,
    ".doc": DocumentFormat.DOC,
    ".xls": DocumentFormat.XLS,
    ".ppt": DocumentFormat.PPT,
    ".rtf": DocumentFormat.RTF,
    ".msg": DocumentFormat.MSG,
    **dict.fromkeys((".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"), DocumentFormat.IMAGE),
}
"""The format each extension promises, for telling the user when the bytes say otherwise."""
_PLAIN_TEXTS = frozenset({DocumentFormat.TXT, DocumentFormat.MARKDOWN, DocumentFormat.CSV})
"""Formats a name only breaks ties between: a `.txt` file read as Markdown is no surprise."""


def extension_note(filename: str, detected: DocumentFormat) -> str | None:
    """Say so when the file's extension names another format than its bytes hold (a text
    file named `.pdf`): the bytes decide, and the job result carries this note."""
    suffix = PurePath(filename).suffix.lower()
    named = _NAMED_FORMATS.get(suffix)
    if named is None or named is detected or {named, detected} <= _PLAIN_TEXTS:
        return None
    return (
        f"The file is named {suffix} but holds {_KINDS[detected]}; it was read as "
        f"{detected.value} (the bytes decide the format, not the name)."
    )


_KINDS = {
    DocumentFormat.PDF: "a PDF",
    DocumentFormat.DOCX: "a Word document",
    DocumentFormat.HTML: "HTML",
    DocumentFormat.MARKDOWN: "Markdown",
    DocumentFormat.TXT: "plain text",
    DocumentFormat.PPTX: "a PowerPoint deck",
    DocumentFormat.XLSX: "an Excel workbook",
    DocumentFormat.CSV: "CSV records",
    DocumentFormat.EPUB: "an EPUB book",
    DocumentFormat.ODT: "an OpenDocument text",
    DocumentFormat.EML: "an e-mail",
    DocumentFormat.IMAGE: "an image",
    DocumentFormat.DOC: "a legacy Word document",
    DocumentFormat.XLS: "a legacy Excel workbook",
    DocumentFormat.PPT: "a legacy PowerPoint deck",
    DocumentFormat.RTF: "an RTF document",
    DocumentFormat.MSG: "an Outlook message",
    DocumentFormat.ODS: "an OpenDocument spreadsheet",
    DocumentFormat.ODP: "an OpenDocument presentation",
    DocumentFormat.MBOX: "an mbox mail archive",
}


def _hint(filename: str | None, content_type: str | None) -> DocumentFormat | None:
    if filename and (by_name := _EXTENSIONS.get(PurePath(filename).suffix.lower())):
        return by_name
    if content_type:
        return _CONTENT_TYPES.get(content_type.split(";")[0].strip().lower())
    return None


def _binary_kind(data: bytes) -> str | None:
    for offset, magic, kind in _MAGIC:
        if data.startswith(magic, offset):
            return kind
    if data.startswith(b"RIFF"):
        return _RIFF.get(data[8:12], "a RIFF media file")
    if data.startswith(b"\x00\x00\x00") and data.startswith(b"ftyp", 4):  # ISO media box
        return "an MP4/QuickTime media file"
    if _BZIP2.match(data):
        return "a bzip2 archive"
    if data.startswith(b"MZ") and b"\x00" in data[2:64]:
        return "a Windows executable"
    return None


def _detect_text(data: bytes, hint: DocumentFormat | None) -> Detection:
    """HTML by its markup, then Markdown or plain text by structure; `hint` breaks ties."""
    decoded = decode_text(data)
    if decoded is None or control_ratio(decoded.text) > 0.01:
        raise UnsupportedFormat(
            f"This file holds binary data that is not a supported document format; {_SUPPORTED}."
        )
    text = decoded.text
    if not text.strip():
        raise EmptyDocument("The file holds only whitespace; upload a document that has content.")
    sample = text[:_SAMPLE_CHARS]
    if looks_like_email(sample):
        return Detection(_mail_format(data, sample, hint), decoded.encoding)
    if _starts_as_svg(sample):
        raise UnsupportedFormat(
            "This file is an SVG image: its text is drawing markup, which is not indexed "
            f"(it would be stored as raw XML). Export it as PDF, or as PNG to be read by OCR; "
            f"{_SUPPORTED}."
        )
    if _starts_as_html(sample):
        return Detection(DocumentFormat.HTML, decoded.encoding if decoded.had_bom else None)
    if _is_csv(sample, hint):
        return Detection(DocumentFormat.CSV, decoded.encoding)
    score, strong = _markdown_evidence(sample)
    confident = score >= _CONFIDENT_MARKDOWN and strong >= 3
    if not confident and _mostly_html(sample, hint):
        return Detection(DocumentFormat.HTML, decoded.encoding if decoded.had_bom else None)
    if confident or (score >= 0 and hint is DocumentFormat.MARKDOWN):
        return Detection(DocumentFormat.MARKDOWN, decoded.encoding)
    if hint is None and score >= _LIKELY_MARKDOWN and strong > 0:
        return Detection(DocumentFormat.MARKDOWN, decoded.encoding)
    return Detection(DocumentFormat.TXT, decoded.encoding)


def _mail_format(data: bytes, sample: str, hint: DocumentFormat | None) -> DocumentFormat:
    """An mbox archive when the file opens with a `From ` separator and holds a second
    message (or is named .mbox); otherwise one e-mail, separator line or not."""
    if not starts_with_separator(sample) or hint is DocumentFormat.EML:
        return DocumentFormat.EML
    if hint is DocumentFormat.MBOX or is_mbox(data):
        return DocumentFormat.MBOX
    return DocumentFormat.EML


def _is_csv(sample: str, hint: DocumentFormat | None) -> bool:
    """Delimited records, unless the name says prose (text both ways: the name breaks ties)."""
    if hint in (DocumentFormat.TXT, DocumentFormat.MARKDOWN, DocumentFormat.HTML):
        return False
    rows = _CSV_ROWS_HINTED if hint is DocumentFormat.CSV else _CSV_ROWS_UNHINTED
    return csv_dialect(sample, min_rows=rows) is not None


def _starts_as_html(sample: str) -> bool:
    """A doctype naming HTML, or `<html>`/`<head>`/`<body>` after any prologue."""
    head = sample[:16_384]
    position = 0
    while match := _HTML_PROLOGUE.match(head, position):
        if match.group().lstrip()[:9].lower() == "<!doctype":
            return "html" in match.group().lower()
        position = match.end()
    return _HTML_ROOT.match(head, position) is not None


def _starts_as_svg(sample: str) -> bool:
    """A doctype naming SVG, or an `<svg>` root after any prologue."""
    head = sample[:16_384]
    position = 0
    while match := _HTML_PROLOGUE.match(head, position):
        if match.group().lstrip()[:9].lower() == "<!doctype":
            return _SVG_DOCTYPE.match(match.group()) is not None
        position = match.end()
    return _SVG_ROOT.match(head, position) is not None


def _mostly_html(sample: str, hint: DocumentFormat | None) -> bool:
    """An HTML fragment: much of the text is markup of known HTML elements."""
    blocks = len(_HTML_BLOCK.findall(sample))
    if blocks == 0:
        return False
    if hint is DocumentFormat.HTML:
        return True
    visible = len(_WHITESPACE.sub("", sample))
    markup = sum(len(_WHITESPACE.sub("", tag)) for tag in _HTML_TAG.findall(sample))
    return blocks >= 2 and markup >= _HTML_DENSITY * visible


def _markdown_evidence(sample: str) -> tuple[float, int]:
    """Weighted Markdown markers per non-blank line, and how many strong markers there are.

    Strong markers (ATX headings, fences, links, pipe tables, front matter) rarely occur in
    plain text; lists, emphasis and setext underlines do, so they weigh little; reST
    directives and roles count against.
    """
    lines = sum(1 for line in sample.splitlines() if line.strip()) or 1
    front_matter = 1 if _FRONT_MATTER.match(sample) else 0
    atx = len(_ATX.findall(sample))
    fences = (len(_FENCE.findall(sample)) + 1) // 2
    links = len(_LINK.findall(sample)) + len(_LINK_DEFINITION.findall(sample))
    tables = len(_TABLE_RULE.findall(sample))
    strong = front_matter + atx + fences + links + tables
    weighted = (
        10 * front_matter
        + 3 * atx
        + 4 * fences
        + 2 * links
        + 5 * tables
        + 1.0 * len(_SETEXT.findall(sample))
        + 0.5 * len(_LIST_ITEM.findall(sample))
        + 0.5 * len(_EMPHASIS.findall(sample))
        - 3 * len(_RST.findall(sample))
    )
    return weighted / lines, strong
