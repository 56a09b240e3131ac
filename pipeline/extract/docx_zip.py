"""Open a DOCX's ZIP container safely and hand python-docx a copy it cannot be hurt by.

python-docx reads each part with `ZipFile.read`, which inflates a member in one call and only
then cuts it to the size the ZIP declares, so a member that under-declares its size (with a
matching CRC) still inflates to whatever it really holds. We therefore never give python-docx
the uploaded ZIP:

1. the central directory is checked first, without inflating anything: member count, total
   declared size, and each member's declared compression ratio (zip bombs);
2. every member is then read through `ZipFile.open`, whose streaming reader inflates at most
   one chunk at a time and stops at the declared size (a liar yields a truncated member or a
   CRC error, never more bytes than declared);
3. the members are re-packed uncompressed (ZIP_STORED), so python-docx has nothing to inflate.

The same pass refuses XML parts that carry a DOCTYPE (Word never writes one) and rewrites
ISO/IEC 29500 Strict namespaces to their Transitional twins, which python-docx understands.
"""

from __future__ import annotations

import io
import zipfile
import zlib

from pipeline.errors import CorruptDocument, DocumentTooLarge, EncryptedDocument, UnsupportedFormat

MAX_MEMBERS = 10_000
"""More ZIP members than any real DOCX has; past this the package is refused."""

RATIO_FLOOR_BYTES = 1 << 20
"""Members smaller than this skip the ratio check: small XML parts compress very well."""

_READ_CHUNK = 1 << 20

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
_DOCTYPE_MARKERS = tuple("<!DOCTYPE".encode(enc) for enc in ("ascii", "utf-16-le", "utf-16-be"))


def repack_docx(data: bytes, *, max_uncompressed_bytes: int, max_compression_ratio: float) -> bytes:
    """Check the DOCX container in `data` and return its members re-packed uncompressed.

    Raises `EncryptedDocument` for a password-protected (OLE2-wrapped) DOCX,
    `UnsupportedFormat` for another OLE2 file (a legacy .doc), `DocumentTooLarge` for ZIP
    bombs and `CorruptDocument` for anything that is not a sound ZIP with a
    `word/document.xml`.
    """
    if data.startswith(_OLE2_MAGIC):
        _refuse_ole2(data)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise CorruptDocument(
            "The DOCX is not a readable ZIP package (it may be truncated or damaged)."
        ) from exc
    with archive:
        infos = archive.infolist()
        _check_declared_sizes(
            infos,
            max_uncompressed_bytes=max_uncompressed_bytes,
            max_compression_ratio=max_compression_ratio,
        )
        # Duplicate names: like ZipFile.read, the last entry wins.
        members = {info.filename: info for info in infos if not info.is_dir()}
        if "word/document.xml" not in members:
            raise CorruptDocument("The DOCX has no word/document.xml, so it holds no Word text.")
        strict = _STRICT_MARKER in _read_member(archive, members.get("_rels/.rels"))
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as repacked:
            for name, info in members.items():
                blob = _read_member(archive, info)
                if name.lower().endswith((".xml", ".rels")):
                    _refuse_doctype(blob)
                    if strict:
                        blob = _strict_to_transitional(blob)
                repacked.writestr(name, blob)
    return out.getvalue()


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


def _check_declared_sizes(
    infos: list[zipfile.ZipInfo], *, max_uncompressed_bytes: int, max_compression_ratio: float
) -> None:
    """Refuse bombs from the central directory alone, before inflating a single byte."""
    if len(infos) > MAX_MEMBERS:
        raise DocumentTooLarge(
            f"The DOCX has {len(infos):,} ZIP members, above the limit of {MAX_MEMBERS:,}."
        )
    total = sum(info.file_size for info in infos)
    if total > max_uncompressed_bytes:
        raise DocumentTooLarge(
            f"The DOCX declares {total:,} bytes uncompressed, above the limit of "
            f"{max_uncompressed_bytes:,}."
        )
    for info in infos:
        if info.flag_bits & 0x1:
            raise EncryptedDocument(
                "The DOCX's ZIP members are password-protected; remove the password and "
                "upload it again."
            )
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            # Office only writes these two; bzip2/LZMA readers also inflate without a bound.
            raise CorruptDocument(
                f"The DOCX member {info.filename!r} uses a compression method (ZIP method "
                f"{info.compress_type}) that DOCX does not allow."
            )
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_FLOOR_BYTES and ratio > max_compression_ratio:
            raise DocumentTooLarge(
                f"The DOCX member {info.filename!r} expands {ratio:,.0f} times (above "
                f"{max_compression_ratio:,.0f}); it looks like a decompression bomb."
            )


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo | None) -> bytes:
    """Inflate one member chunk by chunk, never past its declared size."""
    if info is None:
        return b""
    chunks: list[bytes] = []
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(_READ_CHUNK):
                chunks.append(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as exc:
        raise CorruptDocument(
            f"The DOCX member {info.filename!r} is damaged and cannot be read."
        ) from exc
    return b"".join(chunks)


def _refuse_doctype(blob: bytes) -> None:
    """Refuse XML with a document type declaration, the only place entities can be declared.

    python-docx already parses with `resolve_entities=False` (lxml also defaults to
    `no_network=True` and `load_dtd=False`), so entities would not be expanded; refusing is
    clearer than silently dropping the text behind an entity reference.
    """
    if any(marker in blob for marker in _DOCTYPE_MARKERS):
        raise CorruptDocument(
            "The DOCX contains XML entity declarations (a DOCTYPE), which Word never writes "
            "and which are not allowed."
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
