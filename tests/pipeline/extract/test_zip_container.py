"""The ZIP pre-scan every package format shares (DOCX's own cases are in test_extract_docx)."""

from __future__ import annotations

import io
import struct
import zipfile

import pytest

from docingest.pipeline.errors import CorruptDocument, DocumentTooLarge, EncryptedDocument
from docingest.pipeline.extract.zip_container import MAX_PATH_DEPTH, SafeZip, ZipLimits

LIMITS = ZipLimits(max_uncompressed_bytes=64 * 2**20, max_compression_ratio=200.0)


def package(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, blob in members.items():
            archive.writestr(name, blob)
    return buffer.getvalue()


def test_members_are_read_and_repacked_uncompressed() -> None:
    data = package({"a.xml": b"<a/>" * 1000, "dir/": b"", "b.bin": b"\x00\x01"})
    with SafeZip(data, label="ODT", limits=LIMITS) as container:
        assert set(container.members) == {"a.xml", "b.bin"}  # folders are not members
        assert container.read("a.xml") == b"<a/>" * 1000
        assert container.read("missing") == b""
        repacked = zipfile.ZipFile(io.BytesIO(container.repack()))
    assert {info.compress_type for info in repacked.infolist()} == {zipfile.ZIP_STORED}


def test_a_highly_compressed_member_is_a_bomb_named_by_format() -> None:
    data = package({"content.xml": bytes(8 * 2**20)})  # 8 MiB of zeros: ratio ~1,000
    with pytest.raises(DocumentTooLarge, match="The EPUB member 'content.xml' expands"):
        SafeZip(data, label="EPUB", limits=LIMITS)


def test_deeply_nested_paths_are_refused() -> None:
    deep = "/".join(["d"] * (MAX_PATH_DEPTH + 1)) + "/x.xml"
    with pytest.raises(CorruptDocument, match="folders deep"):
        SafeZip(package({deep: b"<x/>"}), label="ODT", limits=LIMITS)
    fine = "/".join(["d"] * MAX_PATH_DEPTH) + "/x.xml"
    SafeZip(package({fine: b"<x/>"}), label="ODT", limits=LIMITS)


def test_encrypted_members_are_encrypted_document() -> None:
    data = bytearray(package({"content.xml": b"<x/>"}))
    central = data.find(b"PK\x01\x02")
    struct.pack_into("<H", data, central + 8, 0x1)  # general purpose flag: encrypted
    with pytest.raises(EncryptedDocument, match="password-protected"):
        SafeZip(bytes(data), label="XLSX", limits=LIMITS)


def test_a_nested_archive_is_copied_never_opened() -> None:
    inner = package({"bomb.bin": bytes(4 * 2**20)})
    data = package({"ppt/embeddings/book.xlsx": inner})
    with SafeZip(data, label="PPTX", limits=LIMITS) as container:
        assert container.read("ppt/embeddings/book.xlsx") == inner
