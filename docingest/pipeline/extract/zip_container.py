"""Open the ZIP container of an Office, OpenDocument or EPUB file without trusting it.

Every ZIP-based format (DOCX, XLSX, PPTX, ODT, EPUB) goes through `SafeZip` before any parser
sees a byte:

1. the central directory is checked first, without inflating anything: member count, total
   declared size, each member's declared compression ratio (zip bombs), compression methods,
   encryption flags and how deeply member paths nest;
2. members are then read only through `ZipFile.open`, whose streaming reader inflates at most
   one chunk at a time and stops at the declared size (a member that under-declares its size
   yields a truncated member or a CRC error, never more bytes than declared);
3. a library that inflates members itself in one call (python-docx, python-pptx) gets
   `repack()`: the members re-packed uncompressed (ZIP_STORED), so it has nothing to inflate.

Nested archives (a workbook embedded in a slide deck, a ZIP attached inside an EPUB) count
towards the declared total at their own compressed size and are never opened.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from docingest.pipeline.errors import CorruptDocument, DocumentTooLarge, EncryptedDocument

MAX_MEMBERS = 10_000
"""More ZIP members than any real document package has; past this the package is refused."""

MAX_PATH_DEPTH = 32
"""Deepest member path (folders) accepted; office suites write four or five levels."""

RATIO_FLOOR_BYTES = 1 << 20
"""Members smaller than this skip the ratio check: small XML parts compress very well."""

_READ_CHUNK = 1 << 20

DOCTYPE_MARKERS = tuple("<!DOCTYPE".encode(enc) for enc in ("ascii", "utf-16-le", "utf-16-be"))
"""A document type declaration, the only place XML entities can be declared."""


@dataclass(frozen=True, slots=True)
class ZipLimits:
    """What a package's central directory may declare."""

    max_uncompressed_bytes: int
    max_compression_ratio: float


class SafeZip:
    """A ZIP container whose directory was checked and whose members are read bounded.

    `label` names the format in error messages ("DOCX", "EPUB", ...). Duplicate member
    names resolve like `ZipFile.read`: the last entry wins.
    """

    def __init__(self, data: bytes, *, label: str, limits: ZipLimits) -> None:
        self.label = label
        try:
            self._archive = zipfile.ZipFile(io.BytesIO(data))
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
            raise CorruptDocument(
                f"The {label} is not a readable ZIP package (it may be truncated or damaged)."
            ) from exc
        infos = self._archive.infolist()
        try:
            _check_directory(infos, label=label, limits=limits)
        except BaseException:
            self._archive.close()
            raise
        self.members = {info.filename: info for info in infos if not info.is_dir()}

    def __enter__(self) -> SafeZip:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._archive.close()

    def has(self, name: str) -> bool:
        return name in self.members

    def read(self, name: str) -> bytes:
        """Inflate one member chunk by chunk, never past its declared size; b"" if absent."""
        info = self.members.get(name)
        if info is None:
            return b""
        chunks: list[bytes] = []
        try:
            with self._archive.open(info) as stream:
                while chunk := stream.read(_READ_CHUNK):
                    chunks.append(chunk)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as exc:
            raise CorruptDocument(
                f"The {self.label} member {name!r} is damaged and cannot be read."
            ) from exc
        return b"".join(chunks)

    def read_xml(self, name: str) -> bytes:
        """`read` for an XML part, refusing one that declares a DOCTYPE (see `refuse_doctype`)."""
        blob = self.read(name)
        refuse_doctype(blob, label=self.label)
        return blob

    def repack(self, transform: Callable[[str, bytes], bytes] | None = None) -> bytes:
        """Return every member re-packed uncompressed, each passed through `transform`."""
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as repacked:
            for name in self.members:
                blob = self.read(name)
                repacked.writestr(name, transform(name, blob) if transform else blob)
        return out.getvalue()


@dataclass(frozen=True, slots=True)
class OfficePackage:
    """An OOXML package checked and re-packed uncompressed for its library."""

    repacked: bytes
    has_core_properties: bool
    """Whether `docProps/core.xml` exists: without it the libraries invent properties."""


def repack_office(data: bytes, *, label: str, limits: ZipLimits, main_part: str) -> OfficePackage:
    """Check an OOXML package (XLSX, PPTX), refuse a DOCTYPE in its XML parts, and re-pack it.

    Raises `CorruptDocument` when `main_part` (its format's root part) is missing.
    """

    def check(name: str, blob: bytes) -> bytes:
        if name.lower().endswith((".xml", ".rels", ".vml")):
            refuse_doctype(blob, label=label)
        return blob

    with SafeZip(data, label=label, limits=limits) as package:
        if not package.has(main_part):
            raise CorruptDocument(
                f"The {label} has no {main_part}, so it is not a {label} document."
            )
        return OfficePackage(package.repack(check), package.has("docProps/core.xml"))


def refuse_doctype(blob: bytes, *, label: str) -> None:
    """Refuse XML with a document type declaration, the only place entities can be declared.

    The parsers we hand parts to do not resolve entities (lxml with `resolve_entities=False`,
    expat with its billion-laughs guard), so entities would not be expanded; refusing is
    clearer than silently dropping the text behind an entity reference. Office suites never
    write a DOCTYPE into these parts.
    """
    if any(marker in blob for marker in DOCTYPE_MARKERS):
        raise CorruptDocument(
            f"The {label} contains XML entity declarations (a DOCTYPE), which its format "
            "never needs and which are not allowed."
        )


def _check_directory(infos: list[zipfile.ZipInfo], *, label: str, limits: ZipLimits) -> None:
    """Refuse bombs from the central directory alone, before inflating a single byte."""
    if len(infos) > MAX_MEMBERS:
        raise DocumentTooLarge(
            f"The {label} has {len(infos):,} ZIP members, above the limit of {MAX_MEMBERS:,}."
        )
    total = sum(info.file_size for info in infos)
    if total > limits.max_uncompressed_bytes:
        raise DocumentTooLarge(
            f"The {label} declares {total:,} bytes uncompressed, above the limit of "
            f"{limits.max_uncompressed_bytes:,}."
        )
    for info in infos:
        _check_member(info, label=label, limits=limits)


def _check_member(info: zipfile.ZipInfo, *, label: str, limits: ZipLimits) -> None:
    if info.flag_bits & 0x1:
        raise EncryptedDocument(
            f"The {label}'s ZIP members are password-protected; remove the password and "
            "upload it again."
        )
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        # Office suites only write these two; bzip2/LZMA readers also inflate without a bound.
        raise CorruptDocument(
            f"The {label} member {info.filename!r} uses a compression method (ZIP method "
            f"{info.compress_type}) that {label} does not allow."
        )
    if info.filename.count("/") > MAX_PATH_DEPTH:
        raise CorruptDocument(
            f"The {label} member {info.filename[:200]!r} nests more than {MAX_PATH_DEPTH} "
            "folders deep, which no real document does."
        )
    ratio = info.file_size / max(info.compress_size, 1)
    if info.file_size > RATIO_FLOOR_BYTES and ratio > limits.max_compression_ratio:
        raise DocumentTooLarge(
            f"The {label} member {info.filename!r} expands {ratio:,.0f} times (above "
            f"{limits.max_compression_ratio:,.0f}); it looks like a decompression bomb."
        )
