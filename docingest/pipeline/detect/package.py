"""Tell which document a ZIP package or an OLE2 compound file holds, from its directory.

A ZIP is named by what it lists, never by inflating anything: OOXML by its main part
(`word/document.xml`, `xl/workbook.xml`, `ppt/presentation.xml`), OpenDocument and EPUB by
their stored `mimetype` entry (or, failing that, `META-INF/container.xml` for EPUB and
`content.xml` for ODT, ODS and ODP by the name's suffix). An OLE2 file is named by the
streams at its root (`detect_ole2`).
"""

from __future__ import annotations

import io
import struct
import zipfile

from docingest.pipeline.document import Detection, DocumentFormat
from docingest.pipeline.errors import EncryptedDocument, UnsupportedFormat

SUPPORTED = (
    "upload a PDF, Word (DOCX, DOC), PowerPoint (PPTX, PPT), Excel (XLSX, XLS), RTF, "
    "OpenDocument (ODT, ODS, ODP), EPUB, HTML, Markdown, CSV, e-mail (.eml, .msg, mbox) or "
    "plain-text file instead"
)

_OOXML_MAIN_PARTS = (
    ("word/document.xml", DocumentFormat.DOCX),
    ("xl/workbook.xml", DocumentFormat.XLSX),
    ("ppt/presentation.xml", DocumentFormat.PPTX),
)
# First member of a package cut short (no central directory left): the extractor for the
# format it starts like reports it as corrupt, which says more than "a damaged ZIP".
_TRUNCATED_PREFIXES = (
    ("word/", DocumentFormat.DOCX),
    ("xl/", DocumentFormat.XLSX),
    ("ppt/", DocumentFormat.PPTX),
)
_ODT_MIMETYPE = "application/vnd.oasis.opendocument.text"
_OPENDOCUMENT = {
    _ODT_MIMETYPE: DocumentFormat.ODT,
    "application/vnd.oasis.opendocument.spreadsheet": DocumentFormat.ODS,
    "application/vnd.oasis.opendocument.presentation": DocumentFormat.ODP,
}
_EPUB_MIMETYPE = "application/epub+zip"


def detect_zip(data: bytes, *, suffix: str = "") -> Detection:
    """The format of the ZIP-based document in `data`; `suffix` (".xlsx") only breaks ties."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:  # reads the central directory only
            names = set(archive.namelist())
            mimetype = _stored_mimetype(archive)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error) as exc:
        return _truncated(data, exc)
    found = [fmt for part, fmt in _OOXML_MAIN_PARTS if part in names]
    if "[Content_Types].xml" in names and found:
        by_suffix = [fmt for fmt in found if suffix == f".{fmt}"]
        return Detection((by_suffix or found)[0])
    if mimetype == _EPUB_MIMETYPE or (not mimetype and "META-INF/container.xml" in names):
        return Detection(DocumentFormat.EPUB)
    if mimetype in _OPENDOCUMENT:
        return Detection(_OPENDOCUMENT[mimetype])
    by_suffix_od = {f".{fmt}": fmt for fmt in _OPENDOCUMENT.values()}
    if not mimetype and suffix in by_suffix_od and "content.xml" in names:
        return Detection(by_suffix_od[suffix])
    kind = _zip_kind(names, mimetype)
    raise UnsupportedFormat(f"This file is {kind}, which is not supported; {SUPPORTED}.")


def _truncated(data: bytes, exc: Exception) -> Detection:
    first = _first_local_name(data)
    if first == "[Content_Types].xml":  # OOXML: the main part's name in a local header says which
        for part, fmt in _OOXML_MAIN_PARTS:
            if part.encode() in data:
                return Detection(fmt)
        return Detection(DocumentFormat.DOCX)  # as before: the DOCX extractor says corrupt
    for prefix, fmt in _TRUNCATED_PREFIXES:
        if first.startswith(prefix):
            return Detection(fmt)
    if first == "mimetype":
        stored = data[30 + len(first) : 30 + len(first) + 64]
        if stored.startswith(_EPUB_MIMETYPE.encode()):
            return Detection(DocumentFormat.EPUB)
        for name, fmt in _OPENDOCUMENT.items():
            if stored.startswith(name.encode()) and stored[len(name) : len(name) + 1] != b"-":
                return Detection(fmt)
    raise UnsupportedFormat(
        f"This file is a damaged ZIP archive whose contents cannot be listed; {SUPPORTED}."
    ) from exc


def _stored_mimetype(archive: zipfile.ZipFile) -> str:
    """The `mimetype` entry of an OpenDocument or EPUB file (stored, never deflated)."""
    try:
        info = archive.getinfo("mimetype")
    except KeyError:
        return ""
    if info.compress_type != zipfile.ZIP_STORED or info.file_size > 200:
        return ""
    return archive.read(info).decode("ascii", errors="replace").strip()


def _first_local_name(data: bytes) -> str:
    """The member name in the first local file header, readable even when the end is cut."""
    if len(data) < 30 or not data.startswith(b"PK\x03\x04"):
        return ""
    (length,) = struct.unpack_from("<H", data, 26)
    return data[30 : 30 + length].decode("utf-8", errors="replace")


def _zip_kind(names: set[str], mimetype: str) -> str:
    prefixes = {name.split("/", 1)[0] for name in names if "/" in name}
    if "xl" in prefixes:
        return "an Excel package without a workbook part (xl/workbook.xml)"
    if "ppt" in prefixes:
        return "a PowerPoint package without a presentation part (ppt/presentation.xml)"
    if "visio" in prefixes:
        return "a Visio drawing (vsdx)"
    if "[Content_Types].xml" in names:
        return "an Office Open XML package without a Word, Excel or PowerPoint document"
    if mimetype.startswith("application/vnd.oasis.opendocument."):
        return f"an OpenDocument {mimetype.rsplit('.', 1)[-1]} file"
    if "META-INF/MANIFEST.MF" in names:
        return "a Java archive (jar)"
    return "a ZIP archive"


# Streams at an OLE2 file's root that name the application, checked in this order: an
# Outlook message may hold attached Word or Excel files (in storages further down), so only
# the root counts.
_OLE2_ROOTS = (
    ("WordDocument", DocumentFormat.DOC),
    ("Workbook", DocumentFormat.XLS),
    ("Book", DocumentFormat.XLS),
    ("PowerPoint Document", DocumentFormat.PPT),
    ("__properties_version1.0", DocumentFormat.MSG),
)
_OLE2_OTHERS = (
    ("VisioDocument", "a Visio drawing (vsd)"),
    ("Quill", "a Publisher document (pub)"),
    ("MatOST", "a Project file (mpp)"),
)


def detect_ole2(data: bytes) -> Detection:
    """The legacy Office file or Outlook message an OLE2 compound file holds, by the names at
    its root; raise for an encrypted OOXML package (Office wraps every password-protected
    DOCX, XLSX and PPTX in one), a damaged compound file, or another application's file."""
    from docingest.pipeline.detect.ole2 import open_ole2  # olefile: only loaded for OLE2 files

    with open_ole2(data, label="OLE2 compound file") as ole:
        names = {entry.name for entry in ole.root.kids}
    if {"EncryptedPackage", "EncryptionInfo"} & names:
        raise EncryptedDocument(
            "This is a password-protected Office document (an encrypted package); "
            "remove the password, save it again (DOCX, XLSX or PPTX) and upload that."
        )
    for name, fmt in _OLE2_ROOTS:
        if name in names:
            return Detection(fmt)
    if any(name.startswith("__substg1.0_") for name in names):
        return Detection(DocumentFormat.MSG)
    kind = next(
        (kind for stream, kind in _OLE2_OTHERS if stream in names),
        "an OLE2 compound file of no supported application",
    )
    raise UnsupportedFormat(f"This file is {kind}, which is not supported; {SUPPORTED}.")
