"""Extraction throughput of the formats of issue 16, beside the bare library doing less.

Run: `.venv/bin/python bench/bench_formats.py [--repeat 5] [--rows 50000]`.

Per format: the corpus's real files together, and one larger file built here (a workbook of
`--rows` rows × 8 columns, the same rows as CSV, a 200-slide deck, a 200-chapter e-book, a
2,000-paragraph ODT and an e-mail of 100 paragraphs with a CSV attachment of `--rows`/10
rows; the prose is War and Peace's, so it compresses as text does). Each file is
detected and extracted (`docingest.pipeline.extract.extract`, the pre-scan included) `--repeat`
times, interleaved with the "bare" way, and the median is kept:

- xlsx: openpyxl's default (non read-only) `load_workbook(data_only=True)` walking every value;
- csv: `csv.reader` over the decoded text, nothing rendered;
- pptx: python-pptx on the uploaded bytes (no pre-scan or re-pack), every shape's text;
- odt: lxml parsing content.xml and joining its text;
- epub: zipfile + lxml.html text of every XHTML member, no spine or TOC;
- eml: `email.message_from_bytes` and the body's content.

The bare ways keep no structure and check nothing: the ratio is the price of what ours does.
"""

from __future__ import annotations

import argparse
import csv
import email
import io
import statistics
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from email import policy
from email.message import EmailMessage
from functools import partial
from pathlib import Path
from xml.sax.saxutils import escape

import lxml.html
import openpyxl
import xlsxwriter
from lxml import etree
from pptx import Presentation

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import find_corpus, machine  # noqa: E402

from docingest.pipeline.detect import detect  # noqa: E402
from docingest.pipeline.errors import IngestError  # noqa: E402
from docingest.pipeline.extract import extract  # noqa: E402
from docingest.pipeline.settings import Settings  # noqa: E402
from tests.pipeline.extract.test_epub import CONTAINER  # noqa: E402
from tests.pipeline.extract.test_odt import build_odt  # noqa: E402

FOLDERS = ("csv", "xlsx", "pptx", "eml", "odt", "epub")
PROSE = "txt/gutenberg-war-and-peace.txt"
"""Real paragraphs for the built decks, documents, books and mail: they compress like text."""


def paragraphs(corpus: Path) -> Iterator[str]:
    """War and Peace's paragraphs, one line each, endlessly."""
    text = (corpus / PROSE).read_text(encoding="utf-8")
    chunks = [" ".join(p.split()) for p in text.split("\n\n") if len(p) > 200]
    while True:
        yield from chunks


def big_xlsx(rows: int) -> bytes:
    """Written with XlsxWriter, which stores strings as Excel does (shared strings, and a
    dimension up front); openpyxl writes inline rich strings, which it reads 3x slower."""
    buffer = io.BytesIO()
    with xlsxwriter.Workbook(buffer, {"in_memory": True}) as workbook:
        sheet = workbook.add_worksheet("Sales")
        for number, row in enumerate(_rows(rows)):
            sheet.write_row(number, 0, row)
    return buffer.getvalue()


def _rows(rows: int) -> Iterator[list[object]]:
    yield ["Region", "Store", "Month", "Units", "Price", "Revenue", "Manager", "Note"]
    for row in range(rows):
        yield [f"Region {row % 7}", f"Store {row % 311}", f"2024-{row % 12 + 1:02d}", row % 997,
               round(row * 0.37 % 100, 2), row * 3, f"Manager {row % 53}", "on target"]  # fmt: skip


def big_csv(rows: int) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(_rows(rows))
    return buffer.getvalue().encode()


def big_pptx(slides: int, prose: Iterator[str]) -> bytes:
    deck = Presentation()
    for number in range(slides):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide title {number}"
        slide.placeholders[1].text_frame.text = f"{next(prose)}\n{next(prose)}"
        slide.notes_slide.notes_text_frame.text = next(prose)
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def big_epub(chapters: int, prose: Iterator[str]) -> bytes:
    items = "".join(
        f'<item id="c{n}" href="c{n}.xhtml" media-type="application/xhtml+xml"/>'
        for n in range(chapters)
    )
    spine = "".join(f'<itemref idref="c{n}"/>' for n in range(chapters))
    opf = (
        '<package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata '
        'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Bench</dc:title></metadata>'
        f"<manifest>{items}</manifest><spine>{spine}</spine></package>"
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", "application/epub+zip", zipfile.ZIP_STORED)
        archive.writestr("META-INF/container.xml", CONTAINER)
        archive.writestr("OEBPS/content.opf", opf)
        for n in range(chapters):
            body = f"<h1>Chapter {n}</h1>" + "".join(
                f"<p>{escape(next(prose))}</p>" for _ in range(20)
            )
            archive.writestr(
                f"OEBPS/c{n}.xhtml",
                f'<html xmlns="http://www.w3.org/1999/xhtml"><body>{body}</body></html>',
            )
    return buffer.getvalue()


def big_odt(count: int, prose: Iterator[str]) -> bytes:
    body = "".join(
        f'<text:h text:outline-level="1">Part {n}</text:h>'
        if n % 50 == 0
        else f"<text:p>{escape(next(prose))}</text:p>"
        for n in range(count)
    )
    return build_odt(body)


def big_eml(rows: int, prose: Iterator[str]) -> bytes:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "a@example.org", "b@example.org", "Data"
    message.set_content("\n\n".join(next(prose) for _ in range(100)))
    message.add_attachment(big_csv(rows), maintype="text", subtype="csv", filename="sales.csv")
    return message.as_bytes()


# --- the bare ways ----------------------------------------------------------------------------


def bare_xlsx(data: bytes) -> int:
    workbook = openpyxl.load_workbook(io.BytesIO(data), data_only=True)
    return sum(1 for sheet in workbook.worksheets for _ in sheet.iter_rows(values_only=True))


def bare_csv(data: bytes) -> int:
    text = data.decode("utf-8", errors="replace")
    return sum(1 for _ in csv.reader(io.StringIO(text)))


def bare_pptx(data: bytes) -> int:
    deck = Presentation(io.BytesIO(data))
    return sum(len(s.text_frame.text) for sl in deck.slides for s in sl.shapes if s.has_text_frame)


def bare_odt(data: bytes) -> int:
    content = zipfile.ZipFile(io.BytesIO(data)).read("content.xml")
    return len("".join(etree.fromstring(content).itertext()))


def bare_epub(data: bytes) -> int:
    archive = zipfile.ZipFile(io.BytesIO(data))
    names = [n for n in archive.namelist() if n.endswith((".xhtml", ".html", ".htm"))]
    return sum(len(lxml.html.fromstring(archive.read(n)).text_content()) for n in names)


def bare_eml(data: bytes) -> int:
    message = email.message_from_bytes(data, policy=policy.default)
    body = message.get_body(preferencelist=("plain", "html"))
    return len(body.get_content()) if body is not None else 0


BARE: dict[str, Callable[[bytes], int]] = {
    "xlsx": bare_xlsx, "csv": bare_csv, "pptx": bare_pptx,
    "odt": bare_odt, "epub": bare_epub, "eml": bare_eml,
}  # fmt: skip


def ours(data: bytes, name: str, settings: Settings) -> int:
    try:
        document = extract(data, detect(data, filename=name), settings=settings)
    except IngestError:  # the corpus's empty and encrypted files fail on purpose
        return 0
    return int(document.extra.get("rows", 0))


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def measure(
    fmt: str, files: list[tuple[str, bytes]], repeat: int, settings: Settings
) -> tuple[float, float, int]:
    """Median seconds for all `files`, ours and bare, interleaved; and the rows ours read."""
    mine, bare, rows = [], [], 0
    for _ in range(repeat):
        mine.append(sum(timed(partial(ours, d, n, settings)) for n, d in files))
        bare.append(sum(timed(partial(_bare_or_skip, fmt, d)) for _, d in files))
    rows = sum(ours(data, name, settings) for name, data in files)
    return statistics.median(mine), statistics.median(bare), rows


def _bare_or_skip(fmt: str, data: bytes) -> int:
    try:
        return BARE[fmt](data)
    except Exception:  # the bare way chokes on the corpus's broken files: no time to count
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rows", type=int, default=50_000)
    args = parser.parse_args()
    settings = Settings()
    corpus = find_corpus()
    prose = paragraphs(corpus)
    built = {
        "xlsx": ("built.xlsx", big_xlsx(args.rows)),
        "csv": ("built.csv", big_csv(args.rows)),
        "pptx": ("built.pptx", big_pptx(200, prose)),
        "eml": ("built.eml", big_eml(args.rows // 10, prose)),
        "odt": ("built.odt", big_odt(2000, prose)),
        "epub": ("built.epub", big_epub(200, prose)),
    }
    print(f"machine: {machine()}; median of {args.repeat} interleaved runs\n")
    print(
        "| format | files | MB | ours s | ours MB/s | rows/s | bare s | bare MB/s | ours / bare |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for fmt in FOLDERS:
        real = [(p.name, p.read_bytes()) for p in sorted((corpus / fmt).iterdir())]
        for label, files in ((f"corpus ({len(real)})", real), (built[fmt][0], [built[fmt]])):
            mb = sum(len(data) for _, data in files) / 1e6
            mine, bare, rows = measure(fmt, files, args.repeat, settings)
            per_row = f"{rows / mine:,.0f}" if rows else "-"
            print(
                f"| {fmt} | {label} | {mb:.2f} | {mine:.3f} | {mb / mine:.2f} | {per_row} | "
                f"{bare:.3f} | {mb / bare:.2f} | {mine / bare:.1f} |"
            )


if __name__ == "__main__":
    main()
