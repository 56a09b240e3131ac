"""The two parser fixes the hostile-input run led to, checked in process (fast, exact).

Through the service, `test_hostile_inputs` shows the same inputs end to end.
"""

from __future__ import annotations

import time

import pytest

from pipeline.detect import detect
from pipeline.document import DocumentFormat
from pipeline.errors import DocumentTooLarge
from pipeline.extract.pdf import extract_pdf
from tests.support import hostile_files as hostile


@pytest.mark.parametrize(
    "line",
    [b"[" * 262_144, b"[a](" * 65_536, b"~" * 262_144],
    ids=["brackets", "link-openers", "one-char"],
)
def test_one_huge_line_is_detected_in_linear_time(line: bytes) -> None:
    # Detection weighs the first 256 Ki characters with regular expressions; the setext and
    # link patterns rescanned such a line from each position (minutes for these).
    started = time.perf_counter()
    assert detect(line, filename="line.txt").format is DocumentFormat.TXT
    assert time.perf_counter() - started < 2


def test_pdf_decompression_bomb_is_too_large_not_a_damaged_page() -> None:
    # pypdf stops inflating the 2 GiB content stream at its 75 MB limit (LimitReachedError);
    # that used to count as an unreadable page, and so as corrupt_document.
    started = time.perf_counter()
    with pytest.raises(DocumentTooLarge, match="looks like a decompression bomb"):
        extract_pdf(hostile.flate_bomb_pdf(inflated_mib=2048), max_pages=10)
    assert time.perf_counter() - started < 10
