"""Table rows kept whole: HTML and DOCX sources with data tables, read as they are and printed
to PDF (Chromium `--print-to-pdf`, LibreOffice `--convert-to pdf` with "Tagged PDF" on), today's
code (a git revision) and this checkout side by side in one run.

Run: `.venv/bin/python bench/bench_pdf_tables.py [--baseline REV] [--pdfplumber PYTHON]`
(needs /usr/bin/chromium and soffice). `--pdfplumber` names an interpreter with pdfplumber
installed (not a project dependency: it is measured, not used): its `extract_text()` of the
same PDFs is scored alike, with its CPU beside docingest's. Each PDF is also read with its
tags removed (pypdf deletes the catalog's `StructTreeRoot` and `MarkInfo`): the untagged
path, as LaTeX and exports without "Tagged PDF" give it, where only text aligned in columns
shows a table.

Truth: each source's table rows with two or more non-empty cells, read with lxml (`tr` and
`th`/`td` in HTML, `w:tr` and `w:tc` in DOCX); rows holding a nested table are left out. A
row is kept when one line of the extracted text holds its cells' texts in order
(whitespace collapsed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from _common import find_corpus, machine  # noqa: E402
from bench_pdf_structure import export_baseline  # noqa: E402

HTML = ["debian-reference-ch01.en.html", "python311-library-datetime.html",
        "python311-library-os.html", "wikipedia-duck.html", "sec-10k-filing.html"]  # fmt: skip
DOCX = ["statistics-homework-tables.docx", "debian-reference-ch04-libreoffice.docx",
        "docling-word-sample.docx", "irish-tax-illustrative-cases.docx"]  # fmt: skip
TAGGED_PDF = 'pdf:writer_pdf_Export:{"UseTaggedPDF":{"type":"boolean","value":"true"}}'
"""LibreOffice's export with tags, as "Tagged PDF" in its PDF options (off by default)."""
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
BREAKS = (W + "t", W + "br", W + "cr", W + "tab")
FAMILIES = ("Times New Roman", "Arial", "Courier New")
"""The faces the DOCX sources ask for: without them (or Debian's metric-compatible
fonts-liberation2) LibreOffice sets DejaVu, wider, and narrow cells break words."""

WORKER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from docingest.pipeline.detect import detect
from docingest.pipeline.extract import extract
from docingest.pipeline.settings import Settings
path = Path(sys.argv[2])
data = path.read_bytes()
started = time.process_time()
document = extract(data, detect(data, filename=path.name), settings=Settings())
seconds = time.process_time() - started
print(json.dumps({"seconds": seconds, "text": "\\n\\n".join(b.text for b in document.blocks)}))
"""


PLUMBER = """
import json, sys, time
import pdfplumber
started = time.process_time()
with pdfplumber.open(sys.argv[1]) as pdf:
    text = "\\n".join(page.extract_text() or "" for page in pdf.pages)
print(json.dumps({"seconds": time.process_time() - started, "text": text}))
"""


def run_plumber(python: str, path: Path) -> dict[str, Any]:
    done = subprocess.run(
        [python, "-c", PLUMBER, str(path)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1][:200]}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def squeeze(text: str) -> str:
    return " ".join(text.split())


def html_rows(path: Path) -> list[list[str]]:
    import lxml.html

    tree = lxml.html.fromstring(path.read_bytes())
    rows = []
    for row in tree.iter("tr"):
        if row.xpath(".//table"):
            continue
        cells = [squeeze(cell.text_content()) for cell in row if cell.tag in ("td", "th")]
        cells = [cell for cell in cells if cell]
        if len(cells) >= 2:
            rows.append(cells)
    return rows


def docx_rows(path: Path) -> list[list[str]]:
    from lxml import etree

    with zipfile.ZipFile(path) as archive:
        root = etree.fromstring(archive.read("word/document.xml"))
    rows = []
    for row in root.iter(W + "tr"):
        if row.findall(f".//{W}tbl"):
            continue
        cells = []
        for cell in row.iter(W + "tc"):
            # a line break or a tab inside a paragraph parts words as a space does
            paragraphs = [
                "".join(t.text or "" if t.tag == W + "t" else " " for t in paragraph.iter(*BREAKS))
                for paragraph in cell.iter(W + "p")
            ]
            cells.append(squeeze(" ".join(paragraphs)))
        cells = [cell for cell in cells if cell]
        if len(cells) >= 2:
            rows.append(cells)
    return rows


def kept(rows: list[list[str]], text: str) -> int:
    lines = [squeeze(line) for line in text.split("\n")]
    count = 0
    for cells in rows:
        for line in lines:
            position = 0
            for cell in cells:
                found = line.find(cell, position)
                if found < 0:
                    break
                position = found + len(cell)
            else:
                count += 1
                break
    return count


def run_tree(root: Path, path: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(root), str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1][:200]}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def to_pdf(source: Path, work: Path) -> Path | None:
    target = work / (source.stem + ".pdf")
    if source.suffix.startswith(".htm"):
        command = ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu",
                   "--no-pdf-header-footer", f"--print-to-pdf={target}",
                   source.as_uri()]  # fmt: skip
    else:
        # a profile of its own: a LibreOffice already running under the default profile would
        # take the conversion and lay it out with its own fonts (FONTCONFIG_FILE ignored)
        profile = f"-env:UserInstallation={(work / 'lo-profile').as_uri()}"
        command = ["soffice", profile, "--headless", "--convert-to", TAGGED_PDF, "--outdir",
                   str(work), str(source)]  # fmt: skip
    try:
        subprocess.run(command, capture_output=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        return None
    return target if target.exists() else None


def fonts_used() -> str:
    """The fonts the sources' faces resolve to here (fontconfig): they set where cells wrap."""
    resolved = []
    for family in FAMILIES:
        done = subprocess.run(["fc-match", "-f", "%{family[0]}", family], capture_output=True,
                              text=True, check=False)  # fmt: skip
        resolved.append(f"{family} → {done.stdout.strip() or '?'}")
    return "; ".join(resolved)


def strip_tags(pdf: Path) -> Path:
    """A copy of `pdf` without its structure tree (the untagged path)."""
    from pypdf import PdfWriter

    writer = PdfWriter(clone_from=str(pdf))
    for key in ("/StructTreeRoot", "/MarkInfo"):
        writer._root_object.pop(key, None)
    target = pdf.with_name(pdf.stem + "-untagged.pdf")
    writer.write(target)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--pdfplumber", help="an interpreter with pdfplumber installed")
    args = parser.parse_args()
    corpus = find_corpus()
    print(f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f}")
    print(f"Fonts (FONTCONFIG_FILE={os.environ.get('FONTCONFIG_FILE', '')}): {fonts_used()}")
    print(
        "\n| source | rows | source today | source this | PDF today | PDF this | PDF CPU × "
        "| PDF pdfplumber | pdfplumber CPU × this | untagged today | untagged this |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    totals = [0, 0, 0, 0, 0, 0, 0, 0]
    with tempfile.TemporaryDirectory(prefix="bench-pdf-tables-") as temporary:
        work = Path(temporary)
        baseline = export_baseline(args.baseline, work / "baseline")
        sources = [corpus / "html" / name for name in HTML] + [
            corpus / "docx" / name for name in DOCX
        ]
        for source in sources:
            rows = html_rows(source) if source.suffix.startswith(".htm") else docx_rows(source)
            if not rows:
                continue
            pdf = to_pdf(source, work)
            counts: list[int] = []
            seconds: list[float] = []
            for path in (source, pdf):
                for root in (baseline, REPO):
                    result = run_tree(root, path) if path is not None else {"error": "no PDF"}
                    counts.append(kept(rows, str(result.get("text", ""))))
                    seconds.append(float(result.get("seconds", 0.0)))
            totals[0] += len(rows)
            for index in range(4):
                totals[index + 1] += counts[index]
            shares = [f"{count / len(rows):.0%}" for count in counts]
            ratio = seconds[3] / max(seconds[2], 1e-9)
            plumber = ["", ""]
            if args.pdfplumber and pdf is not None:
                result = run_plumber(args.pdfplumber, pdf)
                count = kept(rows, str(result.get("text", "")))
                totals[5] += count
                cpu = float(result.get("seconds", 0.0)) / max(seconds[3], 1e-9)
                plumber = [f"{count / len(rows):.0%}", f"{cpu:.1f}"]
            untagged = ["", ""]
            if pdf is not None:
                bare = strip_tags(pdf)
                for slot, root in enumerate((baseline, REPO)):
                    count = kept(rows, str(run_tree(root, bare).get("text", "")))
                    totals[6 + slot] += count
                    untagged[slot] = f"{count / len(rows):.0%}"
            print(
                f"| {source.name} | {len(rows)} | " + " | ".join(shares)
                + f" | {ratio:.2f} | " + " | ".join(plumber) + " | " + " | ".join(untagged) + " |"
            )  # fmt: skip
    shares = [f"**{count / max(totals[0], 1):.0%}** ({count})" for count in totals[1:]]
    print(
        f"| **all** | {totals[0]} | " + " | ".join(shares[:4]) + f" | | {shares[4]} | | "
        + " | ".join(shares[5:]) + " |"
    )  # fmt: skip
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
