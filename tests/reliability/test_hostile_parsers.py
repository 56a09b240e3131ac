"""Parser fixes the hostile-input runs led to, checked in process or in one isolated child
(fast, exact).

Through the service, `test_hostile_inputs` shows the same inputs end to end.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.detect import detect
from docingest.pipeline.document import DocumentFormat
from docingest.pipeline.errors import CorruptDocument, DocumentTooLarge
from docingest.pipeline.isolation.parent import Limits
from docingest.pipeline.prepare import prepare_document
from docingest.pipeline.settings import Settings
from tests.support import hostile_files as hostile
from tests.support.image_files import KNOWN_TEXT
from tests.support.prepared import prepare_isolated
from tests.support.proc import CpuMeter


@pytest.mark.parametrize(
    "line",
    [b"[" * 262_144, b"[a](" * 65_536, b"~" * 262_144],
    ids=["brackets", "link-openers", "one-char"],
)
def test_one_huge_line_is_detected_in_linear_time(line: bytes) -> None:
    # Detection weighs the first 256 Ki characters with regular expressions; the setext and
    # link patterns rescanned such a line from each position (minutes for these). CPU time,
    # which a loaded machine does not stretch as it does wall time.
    started = time.process_time()
    assert detect(line, filename="line.txt").format is DocumentFormat.TXT
    assert time.process_time() - started < 2


def test_pdf_decompression_bomb_is_too_large_not_a_crash(tmp_path: Path) -> None:
    # PDFium inflates the 2 GiB content stream until an allocation fails under RLIMIT_AS and
    # then aborts (SIGABRT); the child's peak memory (754 of 763 MiB) tells that from a crash.
    path = tmp_path / "bomb.pdf"
    path.write_bytes(hostile.flate_bomb_pdf(inflated_mib=2048))
    limits = Limits(memory_bytes=800_000_000, cpu_seconds=60, wall_seconds=600)
    with (
        CpuMeter(os.getpid()) as cpu,
        pytest.raises(DocumentTooLarge, match="may be a decompression bomb"),
    ):
        prepare_isolated(path, filename=path.name, settings=Settings(), limits=limits)
    # Stopped by its memory limit, well before its CPU limit (CPU: a loaded machine stretches
    # the wall clock, not the CPU time a parse burns).
    assert cpu.seconds < limits.cpu_seconds / 2, cpu.seconds


@pytest.mark.parametrize(
    ("name", "build", "error", "message"),
    [
        (
            "bomb.png", hostile.png_pixel_bomb, DocumentTooLarge,
            r"declares 2,500,000,000 pixels\); the limit is 100,000,000 pixels",
        ),
        ("cut.jpg", lambda: hostile.truncated_jpeg(KNOWN_TEXT), CorruptDocument, "truncated"),
        (
            "pages.tif", lambda: hostile.many_pages_tiff(10_000), DocumentTooLarge,
            "more than 2,000 pages",
        ),
        (
            "giant.pdf", hostile.giant_page_pdf, DocumentTooLarge,
            "200,000 × 200,000 points.*limit of 100,000,000 pixels",
        ),
    ],
)  # fmt: skip
def test_hostile_image_fails_fast_before_decoding(
    name: str, build: Callable[[], bytes], error: type[Exception], message: str
) -> None:
    data = build()
    started = time.process_time()  # CPU time: a loaded machine does not stretch it
    with pytest.raises(error, match=message):
        prepare_document(
            data,
            filename=name,
            settings=Settings(max_pages=2000),
            chunking=ChunkingSpec.from_settings(Settings()),
        )
    assert time.process_time() - started < 5
