"""Images and image-only PDF pages of known text, drawn at test time for the OCR tests."""

from __future__ import annotations

import difflib
import io
import re
import zlib

from PIL import Image, ImageDraw, ImageFont

from tests.support.pdf_files import build_pdf, stream

KNOWN_TEXT = [
    "Rivers carry sediment from the mountains to the sea,",
    "building deltas where the current slows and spreads.",
    "Farmers along the banks have planted rice and wheat",
    "for thousands of years, trusting the yearly floods.",
    "Engineers now measure every metre of water level",
    "and publish the readings each morning at seven.",
]
"""Six lines of plain prose: common words, punctuation, no ambiguous glyphs."""

_WORD = re.compile(r"[A-Za-z]+")


def text_image(lines: list[str], *, scale: int = 3) -> Image.Image:
    """Black text on white, drawn with Pillow's built-in font at `scale` times its size
    (3 is about 12-point type scanned at 300 DPI)."""
    font = ImageFont.load_default(size=12 * scale)
    height = 20 * scale * (len(lines) + 2)
    image = Image.new("L", (1700, height), "white")
    draw = ImageDraw.Draw(image)
    for number, line in enumerate(lines, 1):
        draw.text((40, 20 * scale * number), line, fill="black", font=font)
    return image


def encoded(image: Image.Image, image_format: str, **options: object) -> bytes:
    out = io.BytesIO()
    image.save(out, image_format, **options)
    return out.getvalue()


def word_accuracy(expected: str, found: str) -> float:
    """Share of the expected words (letters only, case-folded) found in order in `found`."""
    want = [word.casefold() for word in _WORD.findall(expected)]
    got = [word.casefold() for word in _WORD.findall(found)]
    matcher = difflib.SequenceMatcher(a=want, b=got, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()) / max(len(want), 1)


def pdf_with_pages(pages: list[str | Image.Image]) -> bytes:
    """A letter-size PDF: a string becomes a page of Helvetica text (a text layer), an image
    a page that only paints it across the page width (no text layer, as a scan)."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", _FONT]
    kids = []
    for page in pages:
        number = len(objects) + 1
        kids.append(number)
        if isinstance(page, str):
            escaped = page.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            content = b"BT /F1 12 Tf 72 720 Td (%s) Tj ET" % escaped.encode("latin-1")
            objects += [
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (number + 1),
                stream(content),
            ]
        else:
            grey = page.convert("L")
            width, height = 540, 540 * grey.height / grey.width
            objects += [
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                b"/Resources << /XObject << /Im0 %d 0 R >> >> /Contents %d 0 R >>"
                % (number + 1, number + 2),
                stream(
                    zlib.compress(grey.tobytes()),
                    entries=b"/Type /XObject /Subtype /Image /Width %d /Height %d "
                    b"/ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode "
                    % grey.size,
                ),
                stream(b"q %.1f 0 0 %.1f 36 %.1f cm /Im0 Do Q" % (width, height, 756 - height)),
            ]
    references = b" ".join(b"%d 0 R" % kid for kid in kids)
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (references, len(kids))
    return build_pdf(objects)


_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
