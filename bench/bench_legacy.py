"""The legacy formats of issue 26, per format in one run: speed, the parsing child's peak
memory, LibreOffice cold against warm, xlrd against LibreOffice for `.xls`, and the text
fidelity of each legacy file against its modern twin.

Run: `.venv/bin/python bench/bench_legacy.py [--repeat 3]`.

The legacy files are the corpus's DOCX, PPTX and XLSX saved by LibreOffice as `.doc`, `.rtf`,
`.ppt`, `.xls`, `.ods` and `.odp` (`tests/support/legacy_files.py`), plus the 872-paragraph
DOJ handbook as `.doc` for size; `.msg` and mbox are written here (a message with a DOCX
attached; an archive of 2,000 messages). Each file is extracted in a forked child, as the
parsing child does, `--repeat` times; the median time and the child's peak RSS
(`ru_maxrss`) are kept. For `.doc`, `.rtf` and `.ppt` LibreOffice's own peak (VmHWM of the
warm instance) is shown too. Cold: a new instance per file (started, converting, stopped);
warm: the kept instance.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import machine  # noqa: E402

from docingest.pipeline.detect import detect  # noqa: E402
from docingest.pipeline.document import BlockKind, ExtractedDocument  # noqa: E402
from docingest.pipeline.extract import extract  # noqa: E402
from docingest.pipeline.extract.office.instance import Office, warm_instance  # noqa: E402
from docingest.pipeline.extract.xlsx import extract_xlsx  # noqa: E402
from docingest.pipeline.extract.zip_container import ZipLimits  # noqa: E402
from docingest.pipeline.settings import Settings  # noqa: E402
from tests.support import legacy_files, ole2_files  # noqa: E402
from tests.support.paths import CORPUS_DIR  # noqa: E402

SETTINGS = Settings(isolate_extraction=False, max_chunks_per_document=10**6)
_WORD = re.compile(r"\w+")


def _extract(data: bytes, name: str) -> ExtractedDocument:
    return extract(data, detect(data, filename=name), settings=SETTINGS)


def _in_child(data: bytes, name: str) -> tuple[float, int, int]:
    """(seconds, peak RSS bytes, pages or rows) of one extraction in a forked child."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        started = time.perf_counter()
        document = _extract(data, name)
        elapsed = time.perf_counter() - started
        units = document.pages or document.extra.get("rows") or 1
        os.write(write, f"{elapsed} {units}".encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        elapsed_text, units_text = pipe.read().split()
    _, _, usage = os.wait4(pid, 0)
    return float(elapsed_text), usage.ru_maxrss * 1024, int(units_text)


def _overlap(a: ExtractedDocument, b: ExtractedDocument) -> float:
    words = [Counter(_WORD.findall(" ".join(x.text for x in d.blocks).lower())) for d in (a, b)]
    return sum((words[0] & words[1]).values()) / max(sum(w.values()) for w in words)


def _headings(document: ExtractedDocument) -> list[tuple[int, str]]:
    return [(b.level, b.text) for b in document.blocks if b.kind is BlockKind.HEADING]


def _files(directory: Path) -> dict[str, list[tuple[Path, Path | None]]]:
    twins = legacy_files.make_twins(directory)
    files: dict[str, list[tuple[Path, Path | None]]] = {k: list(v) for k, v in twins.items()}
    big = CORPUS_DIR / "docx/doj-chapter13-trustee-handbook-872p.docx"
    files["doc"].append((legacy_files.convert(big, "doc", directory / "big"), big))
    docx = (CORPUS_DIR / "docx/tika-sample-word-document.docx").read_bytes()
    msg = directory / "message.msg"
    msg.write_bytes(ole2_files.msg(subject="Report", body="See attached.\r\n" * 50,
                                   attachments=[("sample.docx", docx)]))  # fmt: skip
    files["msg"] = [(msg, None)]
    mbox = directory / "archive.mbox"
    with mbox.open("wb") as out:
        for number in range(1, 2001):
            out.write(
                f"From a{number}@example.org Mon Jan  1 00:00:00 2024\nFrom: a@example.org\n"
                f"Subject: Message {number}\nDate: Mon, 1 Jan 2024 10:00:00 +0000\n\n".encode()
                + b"A paragraph of the message, long enough to count as text.\n\n" * 20
            )
    files["mbox"] = [(mbox, None)]
    return files


def _speed(files: dict[str, list[tuple[Path, Path | None]]], repeat: int) -> None:
    warm_instance(SETTINGS.extraction_memory_bytes).ensure()  # the fork server's, inherited
    print("| format | files | MB | median s | MB/s | pages or rows/s | child peak RSS MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind, pairs in files.items():
        size = sum(path.stat().st_size for path, _ in pairs)
        times, peaks, units = [], [], 0
        for _ in range(repeat):
            total, peak, units = 0.0, 0, 0
            for path, _ in pairs:
                seconds, rss, count = _in_child(path.read_bytes(), path.name)
                total, peak, units = total + seconds, max(peak, rss), units + count
            times.append(total)
            peaks.append(peak)
        median = statistics.median(times)
        print(f"| {kind} | {len(pairs)} | {size / 2**20:.2f} | {median:.2f} | "
              f"{size / 2**20 / median:.2f} | {units / median:.1f} | "
              f"{max(peaks) / 2**20:.0f} |")  # fmt: skip
    office = warm_instance(SETTINGS.extraction_memory_bytes)
    if office.pid is not None:
        status = Path(f"/proc/{office.pid}/status").read_text()
        hwm = re.search(r"VmHWM:\s+(\d+) kB", status)
        if hwm:
            print(f"\nLibreOffice warm instance peak RSS: {int(hwm.group(1)) / 1024:.0f} MiB")


def _cold_warm(files: dict[str, list[tuple[Path, Path | None]]], repeat: int) -> None:
    path = files["doc"][0][0]
    data = path.read_bytes()
    cold, warm = [], []
    office = Office(SETTINGS.extraction_memory_bytes)
    office.ensure()
    office.convert(
        data, suffix=".doc", export_filter="MS Word 2007 XML", target=".docx", cpu_seconds=300
    )  # fmt: skip  (first load of Writer's libraries)
    for _ in range(repeat):
        fresh = Office(SETTINGS.extraction_memory_bytes)
        started = time.perf_counter()
        fresh.convert(data, suffix=".doc", export_filter="MS Word 2007 XML", target=".docx",
                      cpu_seconds=300)  # fmt: skip
        cold.append(time.perf_counter() - started)
        fresh.stop()
        started = time.perf_counter()
        office.convert(data, suffix=".doc", export_filter="MS Word 2007 XML", target=".docx",
                       cpu_seconds=300)  # fmt: skip
        warm.append(time.perf_counter() - started)
    office.stop()
    c, w = statistics.median(cold), statistics.median(warm)
    print(f"\nLibreOffice on {path.name} ({path.stat().st_size / 1024:.0f} KiB): cold start + "
          f"conversion {c:.2f} s, warm instance {w:.2f} s: {c / w:.1f}x")  # fmt: skip


def _xls_engines(files: dict[str, list[tuple[Path, Path | None]]], repeat: int) -> None:
    office = warm_instance(SETTINGS.extraction_memory_bytes)
    limits = ZipLimits(SETTINGS.max_docx_uncompressed_bytes, SETTINGS.max_docx_compression_ratio)
    ours, theirs = [], []
    for _ in range(repeat):
        for path, _ in files["xls"]:
            data = path.read_bytes()
            started = time.perf_counter()
            _extract(data, path.name)
            ours.append(time.perf_counter() - started)
            started = time.perf_counter()
            xlsx = office.convert(data, suffix=".xls", export_filter="Calc MS Excel 2007 XML",
                                  target=".xlsx", cpu_seconds=300)  # fmt: skip
            extract_xlsx(xlsx, limits=limits, max_chars=SETTINGS.max_extracted_chars)
            theirs.append(time.perf_counter() - started)
    o, t = sum(ours), sum(theirs)
    print(f"\n.xls: xlrd {o:.3f} s against LibreOffice to XLSX + openpyxl {t:.3f} s "
          f"(all files x {repeat}): {t / o:.0f}x")  # fmt: skip


def _fidelity(files: dict[str, list[tuple[Path, Path | None]]]) -> None:
    print("\n| legacy file | modern twin | word overlap | same headings |")
    print("| --- | --- | --- | --- |")
    for kind in ("doc", "rtf", "ppt", "odp", "xls", "ods"):
        for legacy, modern in files[kind]:
            if modern is None:
                continue
            old = _extract(legacy.read_bytes(), legacy.name)
            new = _extract(modern.read_bytes(), modern.name)
            same = _headings(old) == _headings(new)
            print(f"| {legacy.name} | {modern.name} | {_overlap(old, new):.4f} | {same} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory() as directory:
        files = _files(Path(directory))
        _speed(files, args.repeat)
        _cold_warm(files, args.repeat)
        _xls_engines(files, args.repeat)
        _fidelity(files)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
