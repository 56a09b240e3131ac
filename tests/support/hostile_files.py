"""Hostile and broken files for the reliability tests, built at test time (none is committed).

Each generator returns the file's bytes, or writes a large one into a directory and returns its
path, in well under a few seconds: what a file claims to hold (gigabytes of zeros) is never
produced, only its compressed form, from one compressed mebibyte repeated.
"""

from __future__ import annotations

import io
import random
import struct
import sys
import zipfile
import zlib
from pathlib import Path

from pypdf import PdfReader, PdfWriter

from tests.support.docx_files import OFFICE_RELS, OPC, WORD_MAIN, build_docx, document_xml
from tests.support.image_files import encoded, text_image
from tests.support.pdf_files import build_pdf, stream

MiB = 1 << 20

# --- PDF ------------------------------------------------------------------------------------


_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def _page(contents: int, *, font: int | None = None, image: int | None = None) -> bytes:
    resources = b""
    if font is not None:
        resources += b"/Font << /F1 %d 0 R >> " % font
    if image is not None:
        resources += b"/XObject << /Im0 %d 0 R >> " % image
    return (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << %s>> /Contents %d 0 R >>" % (resources, contents)
    )


def text_pdf(text: str) -> bytes:
    """A one-page PDF that shows `text` (ASCII) in Helvetica."""
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("ascii")
    return build_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            _page(5, font=4),
            _FONT,
            stream(b"BT /F1 12 Tf 72 720 Td (%s) Tj ET" % escaped),
        ]
    )


def zlib_zeros(mib: int) -> bytes:
    """A valid zlib stream of `mib` MiB of zeros, about 1 KB per MiB, built in milliseconds.

    One MiB is deflated once and ended with a full flush, which resets the compressor, so the
    same bytes deflate every further MiB; the Adler-32 of n zeros is (n mod 65521) << 16 | 1.
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(bytes(MiB)) + compressor.flush(zlib.Z_FULL_FLUSH)
    tail = compressor.flush()
    adler = ((mib * MiB) % 65521) << 16 | 1
    return b"\x78\xda" + block * mib + tail + struct.pack(">I", adler)


def flate_bomb_pdf(*, inflated_mib: int = 2048) -> bytes:
    """A one-page PDF whose content stream is FlateDecode twice over `inflated_mib` of zeros."""
    inner = zlib_zeros(inflated_mib)
    outer = zlib.compress(inner, 9)
    return build_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            _page(5, font=4),
            _FONT,
            stream(outer, entries=b"/Filter [/FlateDecode /FlateDecode] "),
        ]
    )


def cyclic_page_tree_pdf() -> bytes:
    """A page tree whose only kid is a /Pages node listing its own parent as its kid."""
    return build_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Pages /Kids [2 0 R] /Count 1 /Parent 2 0 R >>",
        ]
    )


def many_pages_pdf(pages: int) -> bytes:
    """A PDF of `pages` distinct page objects sharing one content stream and font."""
    kids = b" ".join(b"%d 0 R" % (5 + index) for index in range(pages))
    return build_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
            _FONT,
            stream(b"BT /F1 12 Tf 72 720 Td (One of very many pages.) Tj ET"),
            *[_page(4, font=3)] * pages,
        ]
    )


def encrypted_pdf(text: str, *, user_password: str) -> bytes:
    """`text_pdf(text)` encrypted with AES-128 under a user password."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(text_pdf(text))))
    writer.encrypt(user_password, owner_password=user_password + "-owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def image_only_pdf() -> bytes:
    """One page that paints a 64x64 grey image XObject and has no text operator at all."""
    side = 64
    pixels = bytes((x * 4 + y * 2) % 256 for y in range(side) for x in range(side))
    image = stream(
        pixels,
        entries=b"/Type /XObject /Subtype /Image /Width %d /Height %d "
        b"/ColorSpace /DeviceGray /BitsPerComponent 8 " % (side, side),
    )
    return build_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            _page(5, image=4),
            image,
            stream(b"q 300 0 0 300 156 246 cm /Im0 Do Q"),
        ]
    )


def giant_page_pdf(*, side_points: int = 200_000) -> bytes:
    """`image_only_pdf` on a page `side_points` points square (2,778 inches at 200,000):
    rendering it for OCR at even 72 DPI would take 40 billion pixels."""
    return image_only_pdf().replace(
        b"/MediaBox [0 0 612 792]", b"/MediaBox [0 0 %d %d]" % (side_points, side_points)
    )


# --- images ---------------------------------------------------------------------------------


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_pixel_bomb(*, width: int = 50_000, height: int = 50_000) -> bytes:
    """A 1-bit PNG that declares `width` × `height` pixels (2.5 billion by default) with the
    compressed rows of only the first 64 lines; decoded, it would need gigabytes."""
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    rows = zlib.compress((b"\x00" + bytes((width + 7) // 8)) * 64, 9)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", rows)
        + _png_chunk(b"IEND", b"")
    )


def truncated_jpeg(lines: list[str], *, keep: float = 0.6) -> bytes:
    """A JPEG of `lines` of text, cut off after `keep` of its bytes (no end-of-image marker)."""
    data = encoded(text_image(lines), "JPEG", quality=90)
    return data[: int(len(data) * keep)]


def many_pages_tiff(pages: int) -> bytes:
    """A little-endian TIFF of `pages` 1 × 1 white pages sharing one strip: a chain of
    `pages` image file directories, about 100 bytes each."""
    strip_at = 8
    out = bytearray(b"II*\x00" + struct.pack("<I", 12) + b"\xff\x00\x00\x00")
    tags = [  # (tag, type SHORT=3/LONG=4, value)
        (256, 4, 1), (257, 4, 1), (258, 3, 8), (259, 3, 1), (262, 3, 1),
        (273, 4, strip_at), (278, 4, 1), (279, 4, 1),
    ]  # fmt: skip
    for index in range(pages):
        following = len(out) + 2 + 12 * len(tags) + 4 if index + 1 < pages else 0
        out += struct.pack("<H", len(tags))
        for tag, kind, value in tags:
            out += struct.pack("<HHII", tag, kind, 1, value)
        out += struct.pack("<I", following)
    return bytes(out)


# --- DOCX -----------------------------------------------------------------------------------


def docx_zip_bomb(*, inflated_mib: int = 2048, declared_mib: int | None = None) -> bytes:
    """A Word package with a member that inflates to `inflated_mib` MiB of zeros (~1 KB/MiB).

    The member is honest (sizes and CRC-32 in both headers match what it inflates to) unless
    `declared_mib` is given: then it declares that size and the CRC-32 of that many zeros.
    """
    package = build_docx(document_xml(_paragraph("A package with a bomb inside.")))
    return with_zip_bomb(
        package, "word/media/zeros.bin", inflated_mib=inflated_mib, declared_mib=declared_mib
    )


def with_zip_bomb(
    package: bytes, name: str, *, inflated_mib: int = 2048, declared_mib: int | None = None
) -> bytes:
    """`package` (any ZIP) with member `name` added, inflating to `inflated_mib` MiB of zeros;
    honest unless `declared_mib` is given (see `docx_zip_bomb`)."""
    deflated = zlib_zeros(inflated_mib)[2:-4]  # the raw deflate stream ZIP members hold
    declared = (inflated_mib if declared_mib is None else declared_mib) * MiB
    crc = 0
    zeros = bytes(MiB)
    for _ in range(declared // MiB):
        crc = zlib.crc32(zeros, crc)
    buffer = io.BytesIO(package)
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr(zipfile.ZipInfo(name), deflated)  # stored as-is, patched below
    return _patch_member(buffer.getvalue(), name, crc=crc, size=declared)


def _patch_member(data: bytes, name: str, *, crc: int, size: int) -> bytes:
    """Mark a stored member as deflated, with the given CRC-32 and uncompressed size."""
    patched = bytearray(data)
    local = zipfile.ZipFile(io.BytesIO(data)).getinfo(name).header_offset
    struct.pack_into("<H", patched, local + 8, zipfile.ZIP_DEFLATED)
    struct.pack_into("<I", patched, local + 14, crc)
    struct.pack_into("<I", patched, local + 22, size)
    central = patched.find(b"PK\x01\x02")
    while patched[central + 46 : central + 46 + len(name)] != name.encode():
        central = patched.find(b"PK\x01\x02", central + 4)
    struct.pack_into("<H", patched, central + 10, zipfile.ZIP_DEFLATED)
    struct.pack_into("<I", patched, central + 16, crc)
    struct.pack_into("<I", patched, central + 24, size)
    return bytes(patched)


def _paragraph(text: str) -> str:
    return f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"


def xxe_prolog(url: str) -> str:
    """A DOCTYPE with an external DTD at `url`, file and HTTP entities and a parameter entity."""
    return (
        f'<!DOCTYPE w:document SYSTEM "{url}/doctype.dtd" ['
        '<!ENTITY passwd SYSTEM "file:///etc/passwd">'
        f'<!ENTITY remote SYSTEM "{url}/entity">'
        f'<!ENTITY % param SYSTEM "{url}/param.dtd"> %param;]>'
    )


XXE_BODY = _paragraph("Before &passwd; middle &remote; after")


def xxe_docx(url: str) -> bytes:
    """A DOCX whose word/document.xml declares external entities (see `xxe_prolog`)."""
    return build_docx(document_xml(XXE_BODY, prolog=xxe_prolog(url)))


def xxe_docx_in_renamed_part(url: str) -> bytes:
    """The same entities in a main document part not named `.xml` (`word/main.part`).

    A decoy `word/document.xml` makes it detectable as DOCX; the package's relationships
    make `word/main.part` the document python-docx reads.
    """
    content_types = (
        f'<Types xmlns="{OPC}/content-types"><Default Extension="rels" '
        'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        f'<Override PartName="/word/main.part" ContentType="{WORD_MAIN}"/></Types>'
    )
    rels = (
        f'<Relationships xmlns="{OPC}/relationships"><Relationship Id="rId1" '
        f'Target="word/main.part" Type="{OFFICE_RELS}/officeDocument"/></Relationships>'
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", content_types)
        archive.writestr("_rels/.rels", rels)
        archive.writestr("word/document.xml", document_xml(_paragraph("Decoy part.")))
        archive.writestr("word/main.part", document_xml(XXE_BODY, prolog=xxe_prolog(url)))
    return buffer.getvalue()


# --- binary and text ------------------------------------------------------------------------


def elf_binary(size: int = 64 * 1024) -> bytes:
    """The first `size` bytes of this Python interpreter (an ELF executable on Linux)."""
    with Path(sys.executable).resolve().open("rb") as interpreter:
        data = interpreter.read(size)
    assert data.startswith(b"\x7fELF"), "the interpreter is not an ELF file"
    return data


def random_bytes(size: int = 64 * 1024, *, seed: int = 6) -> bytes:
    """Reproducible noise: no magic number, and not text in any encoding."""
    return random.Random(seed).randbytes(size)


def nested_divs_html(depth: int, *, word: str) -> bytes:
    """`depth` nested `<div>`s around a paragraph holding `word`, then one more paragraph."""
    return (
        "<!DOCTYPE html><html><head><title>Deep</title></head><body>"
        + "<div>" * depth
        + f"<p>Deep inside the nest lies the word {word}.</p>"
        + "</div>" * depth
        + "<p>After the nest comes the closing paragraph.</p></body></html>"
    ).encode()


def tag_dense_html(directory: Path, *, size: int) -> Path:
    """Write `size` bytes of HTML made of tiny elements, each a node of the parser's tree.

    Each 8-byte `<i>x</i>` becomes a tag and a string object in BeautifulSoup's tree: 5 MB of
    them took ~650 MB, so 50 MB would need gigabytes.
    """
    path = directory / "tag-dense.html"
    line = b"<i>x</i>" * 15 + b"\n"
    block = line * (MiB // len(line))
    with path.open("wb") as out:
        out.write(b"<!DOCTYPE html><html><head><title>Tags</title></head><body>\n")
        while out.tell() + len(block) <= size:
            out.write(block)
        out.write(b"</body></html>\n")
    return path


def prose(words: list[str]) -> str:
    """A few sentences of European prose around `words`, for encoding tests."""
    return (
        "Die Straßenbahn fährt über die Brücke. Le garçon a commandé un café crème à "
        f"l'hôtel. Key words: {', '.join(words)}.\n\nA second paragraph, so the text has a "
        "shape: naïve façades, smörgåsbord and jalapeño are all spelled with accents.\n"
    )
