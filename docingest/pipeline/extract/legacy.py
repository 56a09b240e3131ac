"""Legacy Word (`.doc`), PowerPoint (`.ppt`) and RTF: converted by LibreOffice, then read
as their modern twins.

LibreOffice (`office/instance.py`, one warm instance per parsing server) writes the file as
DOCX (Word, RTF) or PPTX (PowerPoint); the DOCX and PPTX extractors then give the same blocks
(headings, lists, tables, slides as pages) and core properties as for a file saved in the new
format. Why LibreOffice rather than a text dumper (antiword, catdoc, striprtf): those lose the
headings and tables the chunker cuts at (BENCHMARKS.md, "Legacy formats").

Before a byte reaches LibreOffice, the OLE2 file's own flags are read (olefile): a Word file
with `fEncrypted` or `fObfuscated` set in its FIB and a PowerPoint file with an encrypted
current-user atom or an `EncryptedSummary` stream are password-protected:
`encrypted_document` (LibreOffice would only fail to open them). A damaged compound file
(chains that loop, a FAT pointing at itself) is `corrupt_document` there already.
"""

from __future__ import annotations

import resource
import struct

import numpy as np

from docingest.pipeline.detect.ole2 import open_ole2, read_stream
from docingest.pipeline.document import DocumentFormat, ExtractedDocument, PageReporter
from docingest.pipeline.errors import CorruptDocument, EncryptedDocument
from docingest.pipeline.extract.docx import extract_docx
from docingest.pipeline.extract.office.instance import cpu_budget, warm_instance
from docingest.pipeline.extract.pptx import extract_pptx
from docingest.pipeline.extract.zip_container import ZipLimits

WORD_FILTER = "MS Word 2007 XML"
IMPRESS_FILTER = "Impress MS PowerPoint 2007 XML"
_FIB_FLAGS = 0x0A
_FIB_CCP_TEXT = 0x4C  # FibRgLw97.ccpText: the main document's length in characters
MAX_RTF_DEPTH = 2_000
"""Deepest group nesting accepted in an RTF file (real ones nest a few dozen levels)."""
_F_ENCRYPTED, _F_OBFUSCATED = 0x0100, 0x8000
_PPT_ENCRYPTED_TOKEN = 0xF3D1C4DF  # CurrentUserAtom.headerToken of an encrypted deck
_ENCRYPTED = (
    "This {kind} is password-protected; remove the password in {app}, save it again and "
    "upload that."
)


def extract_doc(
    data: bytes, *, limits: ZipLimits, cpu_seconds: float, memory_bytes: int
) -> ExtractedDocument:
    """A Word 97-2003 document, through DOCX."""
    _refuse_encrypted_doc(data)
    converted = _convert(data, ".doc", WORD_FILTER, ".docx", cpu_seconds, memory_bytes)
    document = extract_docx(
        converted,
        max_uncompressed_bytes=limits.max_uncompressed_bytes,
        max_compression_ratio=limits.max_compression_ratio,
    )
    document.format = DocumentFormat.DOC
    return document


def extract_rtf(
    data: bytes, *, limits: ZipLimits, cpu_seconds: float, memory_bytes: int
) -> ExtractedDocument:
    """An RTF document, through DOCX; one nested deeper than `MAX_RTF_DEPTH` groups is
    `corrupt_document` before LibreOffice sees it."""
    _refuse_deep_rtf(data)
    converted = _convert(data, ".rtf", WORD_FILTER, ".docx", cpu_seconds, memory_bytes)
    document = extract_docx(
        converted,
        max_uncompressed_bytes=limits.max_uncompressed_bytes,
        max_compression_ratio=limits.max_compression_ratio,
    )
    document.format = DocumentFormat.RTF
    return document


def extract_ppt(
    data: bytes,
    *,
    limits: ZipLimits,
    max_slides: int,
    cpu_seconds: float,
    memory_bytes: int,
    on_page: PageReporter | None = None,
) -> ExtractedDocument:
    """A PowerPoint 97-2003 deck, through PPTX: each slide a page."""
    _refuse_encrypted_ppt(data)
    converted = _convert(data, ".ppt", IMPRESS_FILTER, ".pptx", cpu_seconds, memory_bytes)
    document = extract_pptx(converted, limits=limits, max_slides=max_slides, on_page=on_page)
    document.format = DocumentFormat.PPT
    return document


def memory_budget(default: int) -> int:
    """This process's address-space limit (the parsing child's), or `default` without one."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return default if soft == resource.RLIM_INFINITY else int(soft)


def _convert(
    data: bytes, suffix: str, export_filter: str, target: str, cpu: float, memory: int
) -> bytes:
    office = warm_instance(memory_budget(memory))
    return office.convert(
        data, suffix=suffix, export_filter=export_filter, target=target, cpu_seconds=cpu_budget(cpu)
    )


def _refuse_encrypted_doc(data: bytes) -> None:
    with open_ole2(data, label="Word document") as ole:
        stream = read_stream(ole, "WordDocument", label="Word document")
    if stream is None or len(stream) < _FIB_FLAGS + 2:
        raise CorruptDocument("The Word document has no readable WordDocument stream.")
    (flags,) = struct.unpack_from("<H", stream, _FIB_FLAGS)
    if flags & (_F_ENCRYPTED | _F_OBFUSCATED):
        raise EncryptedDocument(_ENCRYPTED.format(kind="Word document", app="Word"))
    if len(stream) >= _FIB_CCP_TEXT + 4:
        (characters,) = struct.unpack_from("<I", stream, _FIB_CCP_TEXT)
        if characters > len(stream):  # each character is one or two bytes of this stream
            raise CorruptDocument(
                f"The Word document declares {characters:,} characters of text, more than "
                f"its {len(stream):,}-byte text stream can hold: it is damaged."
            )


def _refuse_encrypted_ppt(data: bytes) -> None:
    with open_ole2(data, label="PowerPoint deck") as ole:
        summary = ole.exists("EncryptedSummary")
        current = read_stream(ole, "Current User", label="PowerPoint deck") or b""
    token = struct.unpack_from("<I", current, 12)[0] if len(current) >= 16 else 0
    if summary or token == _PPT_ENCRYPTED_TOKEN:
        raise EncryptedDocument(_ENCRYPTED.format(kind="PowerPoint deck", app="PowerPoint"))


def _refuse_deep_rtf(data: bytes) -> None:
    """Measure how deeply `data`'s `{` groups nest, with numpy over the bytes (a Python loop
    over a 100 MB file takes seconds); an escaped brace (`\\{`, `\\}`: after one backslash,
    not after an escaped one) is not a group. Longer runs of backslashes are not worked out:
    they move the count by one at most, against a limit of thousands."""
    raw = np.frombuffer(data, dtype=np.uint8)
    opens, closes = raw == ord("{"), raw == ord("}")
    escaped = np.zeros(len(raw), dtype=bool)
    backslash = raw == ord("\\")
    # a brace right after a backslash that is not itself escaped (`\\\\{` opens a group)
    escaped[1:] = backslash[:-1]
    escaped[2:] &= ~backslash[:-2]
    steps = opens.astype(np.int32) - closes.astype(np.int32)
    steps[escaped & (opens | closes)] = 0
    depth = int(np.cumsum(steps, dtype=np.int64).max(initial=0))
    if depth > MAX_RTF_DEPTH:
        raise CorruptDocument(
            f"The RTF document nests {depth:,} groups deep (more than {MAX_RTF_DEPTH:,}); "
            "it is damaged or hostile."
        )
