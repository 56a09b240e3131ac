"""The one cursor format: a position round-trips, and only through the listing that made it."""

from __future__ import annotations

import pytest

from docingest.pipeline.cursors import MAX_CURSOR_CHARS, decode_cursor, encode_cursor
from docingest.pipeline.errors import InvalidCursor

LISTING = {"kind": "documents", "index": "docs"}


@pytest.mark.parametrize("position", ["a", "reports/2024/q1.pdf", "日本語 ü", "x" * 512, "v3.7"])
def test_a_position_round_trips(position: str) -> None:
    assert decode_cursor(encode_cursor(position, **LISTING), **LISTING) == position


def test_a_cursor_is_bound_to_its_index_kind_and_scope() -> None:
    cursor = encode_cursor("v1.5", kind="chunks", index="docs", scope="a.pdf")
    assert decode_cursor(cursor, kind="chunks", index="docs", scope="a.pdf") == "v1.5"
    for other in (
        {"kind": "documents", "index": "docs", "scope": "a.pdf"},
        {"kind": "chunks", "index": "docs2", "scope": "a.pdf"},
        {"kind": "chunks", "index": "docs", "scope": "b.pdf"},
        {"kind": "chunks", "index": "docs", "scope": ""},
    ):
        with pytest.raises(InvalidCursor):
            decode_cursor(cursor, **other)


def test_the_parts_of_a_listing_cannot_be_shifted_into_each_other() -> None:
    # ("docs", "x\0y") and ("docs\0x", "y") joined by a separator would be the same bytes
    cursor = encode_cursor("p", kind="chunks", index="docs", scope="x\0y")
    with pytest.raises(InvalidCursor):
        decode_cursor(cursor, kind="chunks", index="docs\0x", scope="y")


def test_garbage_forged_and_cut_cursors_are_refused() -> None:
    real = encode_cursor("doc", **LISTING)
    forged = encode_cursor("doc", **LISTING).replace("ZG9j", "ZG9k")  # "doc" → "dod"
    garbage = ["", "c2.", "c2..", "c1.ZG9j", "ZG9j", "c2.!!!.AAAA", "c2.ZG9j", "c2.ZG9j.",
               real[:-1], real + "A", real + "=", forged, "c2." + "A" * MAX_CURSOR_CHARS,
               encode_cursor("doc\x07", **LISTING)]  # fmt: skip
    for cursor in garbage:
        with pytest.raises(InvalidCursor):
            decode_cursor(cursor, **LISTING)
