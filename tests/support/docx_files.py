"""Minimal DOCX packages built at test time (for the extractor's and the hostile-input tests)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
OPC = "http://schemas.openxmlformats.org/package/2006"
OFFICE_RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
CONTENT_TYPES = (
    f'<Types xmlns="{OPC}/content-types">'
    '<Default Extension="rels" '
    'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Default Extension="png" ContentType="image/png"/>'
    '<Override PartName="/word/document.xml" ContentType="{main}"/></Types>'
)
WORD_MAIN = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
PACKAGE_RELS = (
    f'<Relationships xmlns="{OPC}/relationships"><Relationship Id="rId1" '
    f'Target="word/document.xml" Type="{OFFICE_RELS}/officeDocument"/></Relationships>'
)
IMAGE_RELS = (
    f'<Relationships xmlns="{OPC}/relationships"><Relationship Id="rId9" '
    f'Target="media/image1.png" Type="{OFFICE_RELS}/image"/></Relationships>'
)


def document_xml(body: str, *, prolog: str = "") -> str:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>{prolog}<w:document xmlns:w="{W_NS}" '
        'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006">'
        f"<w:body>{body}</w:body></w:document>"
    )


def build_docx(
    document: str,
    *,
    main: str = WORD_MAIN,
    members: dict[str, str] | None = None,
    zeros: tuple[str, int] | None = None,
) -> bytes:
    """Return a minimal DOCX with extra `members`, and a member of `zeros[1]` MiB of zeros.

    The zeros are streamed into the archive, so the test never holds them in memory.
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", CONTENT_TYPES.format(main=main))
        archive.writestr("_rels/.rels", PACKAGE_RELS)
        archive.writestr("word/document.xml", document)
        for name, text in (members or {}).items():
            archive.writestr(name, text)
        if zeros:
            with archive.open(zeros[0], "w") as member:
                for _ in range(zeros[1]):
                    member.write(bytes(1 << 20))
    return buffer.getvalue()


def fixed_table_xml(rows: Sequence[Sequence[str]], widths: Sequence[int]) -> str:
    """A bordered table of fixed column `widths` (twips) as a document body: a cell's "|"
    parts a line each (`w:br`), so a value is set one per line; words wider than their
    column are broken where they no longer fit."""

    def cell(width: int, text: str) -> str:
        runs = "<w:br/>".join(f"<w:t>{part}</w:t>" for part in text.split("|"))
        properties = f'<w:tcPr><w:tcW w:w="{width}" w:type="dxa"/></w:tcPr>'
        return f"<w:tc>{properties}<w:p><w:r>{runs}</w:r></w:p></w:tc>"

    sides = ("top", "left", "bottom", "right", "insideH", "insideV")
    borders = "".join(f'<w:{side} w:val="single" w:sz="4"/>' for side in sides)
    body = "".join(
        "<w:tr>" + "".join(cell(w, c) for w, c in zip(widths, row, strict=True)) + "</w:tr>"
        for row in rows
    )
    grid = "".join(f'<w:gridCol w:w="{width}"/>' for width in widths)
    return document_xml(
        f'<w:tbl><w:tblPr><w:tblW w:w="{sum(widths)}" w:type="dxa"/>'
        f'<w:tblLayout w:type="fixed"/><w:tblBorders>{borders}</w:tblBorders></w:tblPr>'
        f"<w:tblGrid>{grid}</w:tblGrid>{body}</w:tbl><w:p/>"
    )
