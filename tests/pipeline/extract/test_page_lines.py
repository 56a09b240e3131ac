"""`clean`, which every PDF and OCR line goes through, against its definition spelled out.

`clean` skips work where a line needs none (printable ASCII, no two spaces together); the
definition it must keep: drop control characters and U+FFFD, expand the ligature characters,
tabs and wide spaces count as spaces, runs of spaces become one, the ends are stripped.
"""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from docingest.pipeline.extract.page_lines import clean

_SPACES = re.compile(r"[ \u00a0\u2000-\u200a\u3000]+")
_CONTROLS = dict.fromkeys([*range(0, 9), *range(11, 32), *range(127, 160)])
_LIGATURES = {code: unicodedata.normalize("NFKC", chr(code)) for code in range(0xFB00, 0xFB07)}
_DEFINITION = str.maketrans({**_CONTROLS, **_LIGATURES, 0x09: " ", 0x0D: "\n", 0xFFFD: None})


def _by_definition(text: str) -> str:
    return _SPACES.sub(" ", text.translate(_DEFINITION)).strip()


_CHARS = st.sampled_from(
    list("ab Z9.-\t\r\n\x00\x01\x1f\x7f\x85\x9f\xa0é字\u2000\u2005\u200a\u200b\u3000")
    + ["\ufb01", "\ufb03", "\ufffd", "\ufffe", "  "]
)


@given(st.lists(_CHARS, max_size=16).map("".join))
def test_clean_keeps_its_definition(text: str) -> None:
    assert clean(text) == _by_definition(text)


def test_clean_on_lines_a_pdf_gives() -> None:
    assert clean("  Plain ASCII line  ") == "Plain ASCII line"
    assert clean("two  spaces\tand a tab") == "two spaces and a tab"
    assert clean("nbsp\u00a0\u00a0and\u3000ideographic") == "nbsp and ideographic"
    assert clean("e\ufb03cient \x01control\ufffd") == "efficient control"
