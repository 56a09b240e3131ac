"""PDF engines side by side in one run (pypdf, the previous engine, and PDFium through
docingest's extractor), and OCR speed and accuracy with Tesseract.

Run: `.venv/bin/python bench/bench_pdf_engines.py [--skip-pypdf-on-big]`.

PDF: every text PDF of the corpus (not the corrupt, password-protected or scanned ones), each
engine in a forked process of its own, so its peak RSS is measured (`wait4`). pypdf is timed
on `page.extract_text()` per page, what the previous extractor did; PDFium on
`extract_pdf(..., ocr=off)`, blocks included. Words are runs of letters/digits; a glued word
is an alphabetic run of 20 or more letters (`[^\\W\\d_]{20,}`), the issue's measure.

OCR: pages/s at 300 DPI with one and two processes (2 CPUs), tesserocr against pytesseract
per page, and word accuracy against a page of known text rendered here and against the
scanned Vicksburg PDF's own OCR layer, at 200, 300 and 400 DPI.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import find_corpus, machine  # noqa: E402

from docingest.pipeline.extract.ocr import OcrMode, OcrOptions, Recogniser  # noqa: E402
from docingest.pipeline.extract.pdf import extract_pdf  # noqa: E402
from docingest.pipeline.metadata import count_words  # noqa: E402
from tests.support.image_files import (  # noqa: E402
    KNOWN_TEXT,
    pdf_with_pages,
    text_image,
    word_accuracy,
)

GLUED = re.compile(r"[^\W\d_]{20,}")
SKIP = re.compile(r"^(corrupt-|encrypted-|scanned-)")
BIG = {"R-4.2.2-refman.pdf", "gnuplot-5.4-manual.pdf", "debian-reference.en.pdf",
       "irs-irm-2.3.59-400p.pdf", "debian-reference.ja.pdf"}  # fmt: skip


def in_child(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `work` in a forked process; return its result plus `peak_rss_mib`."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            outcome = work()
        except Exception as exc:  # recorded, not fatal: a benchmark row says what failed
            outcome = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        os.write(write_end, json.dumps(outcome).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        payload = pipe.read()
    _, _, usage = os.wait4(pid, 0)
    result: dict[str, Any] = json.loads(payload or b"{}")
    result["peak_rss_mib"] = usage.ru_maxrss / 1024
    return result


def text_stats(text: str, started: tuple[float, float], pages: int) -> dict[str, Any]:
    """Counts of `text`, with the CPU and wall seconds since `started` (process, wall)."""
    cpu, wall = time.process_time() - started[0], time.perf_counter() - started[1]
    words = count_words(text)
    glued = len(GLUED.findall(text))
    return {"seconds": cpu, "wall": wall, "pages": pages, "words": words, "glued": glued}


def clocks() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def with_pypdf(path: Path) -> dict[str, Any]:
    from pypdf import PdfReader

    started = clocks()
    reader = PdfReader(path, strict=False)
    texts = []
    for page in reader.pages:
        try:
            texts.append(page.extract_text())
        except Exception:  # the previous extractor skipped such a page too
            texts.append("")
    return text_stats("\n".join(texts), started, len(reader.pages))


def with_pdfium(path: Path) -> dict[str, Any]:
    started = clocks()
    document = extract_pdf(path.read_bytes(), max_pages=10_000)
    text = "\n\n".join(block.text for block in document.blocks)
    return text_stats(text, started, document.pages or 0)


def pdf_engines(corpus: Path, *, pypdf_on_big: bool) -> None:
    print("\n## PDF engines\n")
    print("CPU seconds of each engine's process (the machine is shared; wall seconds in totals)\n")
    print(
        "| file | pages | pypdf CPU s | PDFium CPU s | speed-up | pypdf words | PDFium words "
        "| pypdf glued | PDFium glued | pypdf peak RSS MiB | PDFium peak RSS MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    totals = {"pypdf": [0.0, 0.0, 0.0], "pdfium": [0.0, 0.0, 0.0]}
    for path in sorted((corpus / "pdf").glob("*.pdf")):
        if SKIP.match(path.name):
            continue
        new = in_child(partial(with_pdfium, path))
        if path.name in BIG and not pypdf_on_big:
            old: dict[str, Any] = {"error": "skipped"}
        else:
            old = in_child(partial(with_pypdf, path))
        row = [path.name, str(new.get("pages", "?"))]
        if "error" in old or "error" in new:
            print(f"| {path.name} | {old.get('error', '')} {new.get('error', '')} |")
            continue
        for engine, result in (("pypdf", old), ("pdfium", new)):
            totals[engine][0] += result["seconds"]
            totals[engine][1] += result["wall"]
            totals[engine][2] += result["pages"]
        row += [f"{old['seconds']:.2f}", f"{new['seconds']:.2f}",
                f"{old['seconds'] / max(new['seconds'], 1e-9):.1f}×",
                str(old["words"]), str(new["words"]),
                f"{old['glued']} ({old['glued'] / max(old['words'], 1):.2%})",
                f"{new['glued']} ({new['glued'] / max(new['words'], 1):.2%})",
                f"{old['peak_rss_mib']:.0f}", f"{new['peak_rss_mib']:.0f}"]  # fmt: skip
        print("| " + " | ".join(row) + " |", flush=True)
    for engine, (seconds, wall, pages) in totals.items():
        print(
            f"\n{engine}: {pages:.0f} pages in {seconds:.1f} CPU s = "
            f"{pages / seconds:.0f} pages per CPU second ({wall:.1f} s wall)"
        )


def ocr_pages_per_second(pages: list[Any], processes: int) -> float:
    """Pages/s when `processes` forked processes each OCR every page in `pages`."""
    started = time.perf_counter()
    pids = []
    for _ in range(processes):
        pid = os.fork()
        if pid == 0:
            recogniser = Recogniser(OcrOptions())
            for image in pages:
                recogniser.read(image, dpi=300)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    return processes * len(pages) / (time.perf_counter() - started)


def rendered_pages(path: Path, dpi: int) -> list[Any]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(path.read_bytes())
    return [pdf[i].render(scale=dpi / 72, grayscale=True).to_pil() for i in range(len(pdf))]


def ocr_bindings(pages: list[Any]) -> None:
    """tesserocr against pytesseract on the same pages, in CPU seconds (pytesseract's work is
    in its `tesseract` subprocess, counted through os.times). Debian's `tesseract` runs
    OpenMP threads that spin while waiting, so it is measured as shipped and with
    OMP_THREAD_LIMIT=1."""
    import pytesseract

    recogniser = Recogniser(OcrOptions())
    timings: dict[str, list[float]] = {"tesserocr": [], "pytesseract": [], "pytesseract 1T": []}
    for image in pages:
        started = time.process_time()
        recogniser.read(image, dpi=300)
        timings["tesserocr"].append(time.process_time() - started)
        for name, threads in (("pytesseract", None), ("pytesseract 1T", "1")):
            if threads:
                os.environ["OMP_THREAD_LIMIT"] = threads
            before = os.times()
            pytesseract.image_to_data(image, lang="eng", config="--dpi 300")
            after = os.times()
            os.environ.pop("OMP_THREAD_LIMIT", None)
            timings[name].append(sum(after[:4]) - sum(before[:4]))
    ours = statistics.median(timings["tesserocr"])
    print(f"{len(pages)} scanned corpus pages at 300 DPI, median CPU s/page:")
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"- {name}: {median:.2f} ({median / ours:.1f}×)")
    print(f"tesserocr: {1 / ours:.2f} pages per CPU second: {2 / ours:.2f} pages/s on 2 idle CPUs")


def ocr(corpus: Path, *, bindings_only: bool = False) -> None:
    print("\n## OCR\n")
    scans = [corpus / "pdf" / name for name in (
        "scanned-huckfinn-p22-no-text.pdf", "scanned-linn-brochure-no-text.pdf",
        "scanned-vicksburg-with-ocr-layer.pdf")]  # fmt: skip
    pages = [image for path in scans for image in rendered_pages(path, 300)]
    ocr_bindings(pages)
    if bindings_only:
        return
    for processes in (1, 2):
        rate = ocr_pages_per_second(pages, processes)
        print(f"tesserocr, {processes} process(es): {rate:.2f} pages/s")

    print("\n| reference | DPI | word accuracy | mean confidence | CPU seconds |")
    print("|---|---:|---:|---:|---:|")
    known = pdf_with_pages([text_image(KNOWN_TEXT, scale=2)])
    vicksburg = (corpus / "pdf" / "scanned-vicksburg-with-ocr-layer.pdf").read_bytes()
    layer = "\n".join(b.text for b in extract_pdf(vicksburg, max_pages=10).blocks)
    for name, data, expected in (("known text page", known, " ".join(KNOWN_TEXT)),
                                 ("vicksburg OCR layer", vicksburg, layer)):  # fmt: skip
        for dpi in (200, 300, 400):
            started = time.process_time()
            options = OcrOptions(mode=OcrMode.FORCE, dpi=dpi)
            document = extract_pdf(data, max_pages=10, ocr=options)
            seconds = time.process_time() - started
            text = "\n".join(block.text for block in document.blocks)
            accuracy = word_accuracy(expected, text)
            confidence = document.extra["ocr"]["confidence"]
            print(f"| {name} | {dpi} | {accuracy:.3f} | {confidence:.3f} | {seconds:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", type=Path, default=find_corpus())
    parser.add_argument("--skip-pypdf-on-big", action="store_true")
    parser.add_argument("--only", choices=("pdf", "ocr", "bindings"))
    args = parser.parse_args()
    print(f"machine: {machine()}; load average before: {os.getloadavg()}")
    if args.only in (None, "pdf"):
        pdf_engines(args.corpus, pypdf_on_big=not args.skip_pypdf_on_big)
    if args.only != "pdf":
        ocr(args.corpus, bindings_only=args.only == "bindings")
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
