"""E-mail and CSV/TSV recognised inside decoded text."""

from __future__ import annotations

import pytest

from docingest.pipeline.detect.sniff import csv_dialect, looks_like_email


@pytest.mark.parametrize(
    "text",
    [
        "From: Ann <ann@example.org>\nTo: Bob <bob@example.org>\nSubject: Hi\n\nBody.\n",
        "\ufeffFrom: ann@example.org\r\nTo: bob@example.org\r\n\r\nBody.\r\n",  # BOM, CRLF
        "FROM: ann@example.org\nTO: bob@example.org\n\nBody.\n",  # names in any case
        "Received: from mx.example.org\n\tby mail.example.org; Mon, 1 Jan 2024\n"
        "Message-ID: <1@example.org>\n\nBody.\n",  # a folded header line
        "From: ann@example.org\nTo: bob@example.org",  # headers alone, no body
    ],
)
def test_a_header_block_with_an_originator_is_an_email(text: str) -> None:
    assert looks_like_email(text)


@pytest.mark.parametrize(
    "text",
    [
        "Subject: the budget\n\nWe meet on Monday.\n",  # one known header
        "Subject: the budget\nDate: Monday\n\nWe meet.\n",  # two, but no originator
        "From: ann@example.org\nX-Tracker: 42\n\nBody.\n",  # one known header
        "From: ann@example.org\nTo: bob@example.org\nnot a header line\n\nBody.\n",
        "From ann@example.org Mon Jan  1 00:00:00 2024\nTo: bob@example.org\n\n",  # mbox line
        "\tindented: first\nFrom: ann@example.org\nTo: bob@example.org\n\n",  # nothing to fold
        "",
    ],
)
def test_other_text_is_no_email(text: str) -> None:
    assert not looks_like_email(text)


@pytest.mark.parametrize("delimiter", [",", ";", "\t"])
def test_records_with_one_width_give_their_dialect(delimiter: str) -> None:
    rows = [["Region", "Sales", "Year"], ["North", "1200", "2023"], ["South", "900", "2024"]]
    text = "".join(delimiter.join(row) + "\n" for row in rows)
    dialect = csv_dialect(text, min_rows=3)
    assert dialect is not None
    assert dialect.delimiter == delimiter


def test_a_quoted_delimiter_is_part_of_its_field() -> None:
    text = '"Smith, John",42\n"Doe, Jane",37\n"Roe, Rich",51\n'
    dialect = csv_dialect(text, min_rows=3)
    assert dialect is not None
    assert (dialect.delimiter, dialect.quotechar) == (",", '"')


def test_min_rows_is_how_many_records_must_agree() -> None:
    text = "name,age\nAnn,41\n"
    assert csv_dialect(text, min_rows=2) is not None
    assert csv_dialect(text, min_rows=3) is None
    # Blank records do not count, and do not break the agreement.
    spaced = "name,age\n\n , \nAnn,41\nBob,37\n"
    assert csv_dialect(spaced, min_rows=3) is not None
    assert csv_dialect(spaced, min_rows=4) is None


@pytest.mark.parametrize(
    "text",
    [
        "name,age,city\nAnn,41\nBob,37,Oslo\n",  # a record of another width
        "alpha\nbeta\ngamma\ndelta\n",  # one field per record
        "a|b|c\n1|2|3\n4|5|6\n",  # a delimiter that is not looked for
        "Hello, world.\nThis line, like the first, has a comma.\nSo, too, does this.\n",
    ],
)
def test_ragged_single_column_or_other_delimiters_are_no_records(text: str) -> None:
    assert csv_dialect(text, min_rows=2) is None


def test_only_the_sample_is_read_and_the_record_cut_by_it_is_dropped() -> None:
    row = ",".join(letter * 300 for letter in "xyz") + "\n"  # 903 characters
    text = row * 100  # the 64 KiB sample ends inside a record's second field
    assert csv_dialect(text, min_rows=3) is not None
    # The same characters as a whole text: there, the short last record is real.
    assert csv_dialect(text[:65_536], min_rows=3) is None


def test_only_the_first_records_must_agree() -> None:
    assert csv_dialect("a,b,c\n" * 250 + "1,2\n", min_rows=3) is not None
    assert csv_dialect("a,b,c\n" * 150 + "1,2\n", min_rows=3) is None
