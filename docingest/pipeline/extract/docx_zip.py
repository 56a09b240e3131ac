"""Open a DOCX's ZIP container safely and hand python-docx a copy it cannot be hurt by.

python-docx reads each part with `ZipFile.read`, which inflates a member in one call and only
then cuts it to the size the ZIP declares, so we never give it the uploaded ZIP: the shared
pre-scan (`zip_container.SafeZip`) checks the central directory and reads every member through
a bounded stream, and python-docx gets the members re-packed uncompressed.

The same pass refuses XML parts that carry a DOCTYPE (Word never writes one) and rewrites
ISO/IEC 29500 Strict namespaces to their Transitional twins, which python-docx understands.
"""

from __future__ import annotations

from docingest.pipeline.errors import CorruptDocument, EncryptedDocument, UnsupportedFormat
from docingest.pipeline.extract.zip_container import SafeZip, ZipLimits, refuse_doctype

_OLE2_MAGIC = bytes.fromhex("d0cf11e0a1b11ae1")

# ISO/IEC 29500 Strict URIs → the Transitional URIs python-docx knows. Prefixes, so the
# relationship types under `officeDocument/relationships/...` are mapped by the same entry.
_STRICT_TO_TRANSITIONAL: tuple[tuple[bytes, bytes], ...] = (
    (
        b"http://purl.oclc.org/ooxml/officeDocument/relationships/extendedProperties",
        b"http://schemas.openxmlformats.org/officeDocument/2006/relationships/extended-properties",
    ),
    (
        b"http://purl.oclc.org/ooxml/officeDocument/relationships/customProperties",
        b"http://schemas.openxmlformats.org/officeDocument/2006/relationships/custom-properties",
    ),
    (
        b"http://purl.oclc.org/ooxml/wordprocessingml/main",
        b"http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    ),
    (
        b"http://purl.oclc.org/ooxml/officeDocument/relationships",
        b"http://schemas.openxmlformats.org/officeDocument/2006/relationships",
    ),
    (
        b"http://purl.oclc.org/ooxml/officeDocument/math",
        b"http://schemas.openxmlformats.org/officeDocument/2006/math",
    ),
    (
        b"http://purl.oclc.org/ooxml/officeDocument/extendedProperties",
        b"http://schemas.openxmlformats.org/officeDocument/2006/extended-properties",
    ),
    (
        b"http://purl.oclc.org/ooxml/officeDocument/customProperties",
        b"http://schemas.openxmlformats.org/officeDocument/2006/custom-properties",
    ),
    (
        b"http://purl.oclc.org/ooxml/officeDocument/docPropsVTypes",
        b"http://schemas.openxmlformats.org/officeDocument/2006/docPropsVTypes",
    ),
    (
        b"http://purl.oclc.org/ooxml/officeDocument/sharedTypes",
        b"http://schemas.openxmlformats.org/officeDocument/2006/sharedTypes",
    ),
    (
        b"http://purl.oclc.org/ooxml/drawingml/main",
        b"http://schemas.openxmlformats.org/drawingml/2006/main",
    ),
    (
        b"http://purl.oclc.org/ooxml/drawingml/wordprocessingDrawing",
        b"http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
    ),
    (
        b"http://purl.oclc.org/ooxml/drawingml/picture",
        b"http://schemas.openxmlformats.org/drawingml/2006/picture",
    ),
    (
        b"http://purl.oclc.org/ooxml/drawingml/chart",
        b"http://schemas.openxmlformats.org/drawingml/2006/chart",
    ),
)
_STRICT_MARKER = b"http://purl.oclc.org/ooxml/"


def repack_docx(data: bytes, *, max_uncompressed_bytes: int, max_compression_ratio: float) -> bytes:
    """Check the DOCX container in `data` and return its members re-packed uncompressed.

    Raises `EncryptedDocument` for a password-protected (OLE2-wrapped) DOCX,
    `UnsupportedFormat` for another OLE2 file (a legacy .doc), `DocumentTooLarge` for ZIP
    bombs and `CorruptDocument` for anything that is not a sound ZIP with a
    `word/document.xml`.
    """
    if data.startswith(_OLE2_MAGIC):
        _refuse_ole2(data)
    limits = ZipLimits(max_uncompressed_bytes, max_compression_ratio)
    with SafeZip(data, label="DOCX", limits=limits) as package:
        if not package.has("word/document.xml"):
            raise CorruptDocument("The DOCX has no word/document.xml, so it holds no Word text.")
        strict = _STRICT_MARKER in package.read("_rels/.rels")

        def check(name: str, blob: bytes) -> bytes:
            if name.lower().endswith((".xml", ".rels")):
                refuse_doctype(blob, label="DOCX")
                if strict:
                    return _strict_to_transitional(blob)
            return blob

        return package.repack(check)


def _refuse_ole2(data: bytes) -> None:
    """Raise the right error for an OLE2 (Compound File) container posing as a DOCX."""
    if "EncryptedPackage".encode("utf-16-le") in data:
        raise EncryptedDocument(
            "The DOCX is password-protected; remove the password in Word and upload it again."
        )
    raise UnsupportedFormat(
        "The file is a legacy binary Office file (for example a Word 97-2003 .doc), not a "
        "DOCX; save it as .docx and upload it again."
    )


def _strict_to_transitional(blob: bytes) -> bytes:
    """Map Strict namespace and relationship-type URIs to their Transitional equivalents.

    A literal byte replacement: it would also rewrite those URIs if they appeared as text
    in a Strict document, which costs nothing worth keeping.
    """
    if _STRICT_MARKER not in blob:
        return blob
    for strict, transitional in _STRICT_TO_TRANSITIONAL:
        blob = blob.replace(strict, transitional)
    return blob
