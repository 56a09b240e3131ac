"""Headings from typography on one-page PDFs typeset at test time (`typeset_pdf`): stacked
titles, wrapped titles, emphasised paragraphs, section numbers in another family or after a
tab stop, contents pages, captions and margin stamps, titles ending in "!" or ":", a second
body size, names centred in a diagram's boxes, releases' numbers, bold lines in lower case,
clauses ending in a colon."""

from __future__ import annotations

from docingest.pipeline.document import BlockKind
from docingest.pipeline.extract.pdf import extract_pdf
from tests.support.structured_pdfs import (
    Typeset,
    fonts_page,
    helvetica_page,
    typeset_pages,
    typeset_pdf,
)

BODY: list[Typeset] = [
    (f"Body line {n} of a paragraph, set in the usual type of the text", 11.0, "regular")
    for n in range(14)
]
GAP: Typeset = ("", 11.0, "regular")


def headings(lines: list[Typeset], *pages: list[Typeset]) -> list[str]:
    data = typeset_pages([lines, *pages]) if pages else typeset_pdf(lines)
    document = extract_pdf(data, max_pages=5)
    return [block.text for block in document.blocks if block.kind is BlockKind.HEADING]


def test_headings_stacked_one_under_another_are_each_a_heading() -> None:
    # A Word title, subtitle and three headings with no body between: six heading lines in
    # a row, each set apart by space, are not one emphasised paragraph.
    stack: list[Typeset] = [
        ("Sample Document Title", 18.0, "bold"), GAP,
        ("And now for a subtitle", 14.0, "regular"), GAP,
        ("Main Heading", 16.0, "regular"), GAP,
        ("Heading Level 1", 16.0, "bold"), GAP,
        ("Heading Level 2", 14.0, "bold"), GAP,
        ("Heading Level 3", 13.0, "bold"), GAP,
    ]  # fmt: skip
    found = headings([*stack, *BODY])
    assert "Heading Level 1" in found
    assert "Heading Level 3" in found
    assert "Sample Document Title" in found


def test_a_bold_paragraph_is_no_heading_even_when_its_first_lines_read_like_one() -> None:
    bold = [
        ("The standing trustee must review the", 11.0, "bold"),
        ("Petition and Schedules of every case", 11.0, "bold"),
        ("And Decide on them within a week.", 11.0, "bold"),
    ]
    assert headings([*BODY[:4], GAP, *bold, GAP, *BODY]) == []
    # Set apart from the paragraph below by space, the same lines' first two are a heading.
    two = [("Review of the Petition", 11.0, "bold"), ("And the Schedules", 11.0, "bold")]
    assert headings([*BODY[:4], GAP, *two, GAP, *BODY]) == [
        "Review of the Petition And the Schedules"
    ]


def test_a_long_run_of_bold_lines_is_an_emphasised_paragraph() -> None:
    run = [(f"Emphasised Line {n} of the Abstract", 11.0, "bold") for n in range(5)]
    assert headings([*BODY[:4], GAP, *run, GAP, *BODY]) == []


def test_a_title_wrapped_over_lines_is_one_heading() -> None:
    wrapped: list[Typeset] = [
        ("CHAPTER 3 - ADMINISTRATION OF CHAPTER 13", 16.0, "bold"),
        ("CASES", 16.0, "bold"), GAP,
        *BODY[:4], GAP,
        ("Program Management", 11.0, "bold"),
        ("and Review", 11.0, "bold"), GAP,
        *BODY[4:8], GAP,
        ("Appointment, Qualifications,", 16.0, "bold"),
        ("and Compensation", 16.0, "bold"), GAP,
        *BODY[8:],
    ]  # fmt: skip
    assert headings(wrapped) == [
        "CHAPTER 3 - ADMINISTRATION OF CHAPTER 13 CASES",
        "Program Management and Review",
        "Appointment, Qualifications, and Compensation",
    ]


def test_a_number_at_a_larger_heading_s_end_is_no_page_number() -> None:
    lines: list[Typeset] = [("Heading Level 1", 16.0, "bold"), GAP, *BODY]
    assert headings(lines) == ["Heading Level 1"]
    # In the body's type, a title ending in a number is a contents line.
    lines = [*BODY[:4], GAP, ("1.2 Introduction 7", 11.0, "regular"), GAP, *BODY]
    assert headings(lines) == []


def test_a_numbered_heading_in_another_family_stands_apart_below() -> None:
    lines: list[Typeset] = [
        *BODY[:5],
        ("2.1. Application of the Criteria", 11.0, "serif"), GAP,
        *BODY[5:9], GAP,
        # A numbered reference in the other family runs on into its next line: no heading.
        ("3. Environmental Protection Agency", 11.0, "serif"),
        *BODY[9:11], GAP,
        # Nor a running head's page number and lower-case topic, nor initials.
        ("16 all.names", 11.0, "serif"), GAP,
        ("11 U.S.C. Section 343", 11.0, "serif"), GAP,
        *BODY[11:],
    ]  # fmt: skip
    assert headings(lines) == ["2.1. Application of the Criteria"]


def test_a_section_number_at_a_tab_stop_is_no_table_row() -> None:
    lines: list[Typeset] = [
        *BODY[:6],
        GAP,
        ("1. CONFLICTS OF INTEREST", 13.0, "bold", 108.0),
        GAP,
        *BODY[6:],
    ]
    assert headings(lines) == ["1. CONFLICTS OF INTEREST"]
    # Two words far apart with no number before them are still a table's header row.
    lines = [*BODY[:6], GAP, ("Name Description", 13.0, "bold", 300.0), GAP, *BODY[6:]]
    assert headings(lines) == []


def test_a_contents_page_gives_no_heading_after_its_first_entry() -> None:
    entries: list[Typeset] = [
        (f"{letter}. SECTION TITLE NUMBER{n}-{n}", 11.0, "regular")
        for n, letter in enumerate("ABCDEF", 1)
    ]
    lines: list[Typeset] = [
        ("Table of Contents", 16.0, "bold"), GAP,
        ("CHAPTER 1 - INTRODUCTION", 11.0, "bold"), *entries[:3],
        ("CHAPTER 2 - APPOINTMENT", 11.0, "bold"), *entries[3:],
        GAP, *BODY,
    ]  # fmt: skip
    assert headings(lines) == ["Table of Contents", "CHAPTER 1 - INTRODUCTION"]


def test_words_that_open_like_captions_or_admonitions_can_be_headings() -> None:
    lines: list[Typeset] = [
        ("Sources", 16.0, "bold"), GAP, *BODY[:4], GAP,
        ("Notes", 16.0, "bold"), GAP, *BODY[4:8], GAP,
        ("Table 3 Results by year", 16.0, "bold"), GAP, *BODY[8:11], GAP,
        ("Note", 11.0, "bold"), GAP, *BODY[11:],
    ]  # fmt: skip
    assert headings(lines) == ["Sources", "Notes"]


def test_a_stamp_set_upright_in_the_margin_is_no_heading() -> None:
    body = b"\n".join(
        b"BT /F1 11 Tf 72 %d Td (Body line %d of a paragraph, set in the usual type) Tj ET"
        % (700 - 14 * n, n)
        for n in range(20)
    )
    stamp = b"BT /F1 20 Tf 0 1 -1 0 30 250 Tm (arXiv:1601.03642v1 [cs.CV] 12 Jan 2016) Tj ET"
    title = b"BT /F1 20 Tf 72 740 Td (A Title in Larger Type) Tj ET"
    document = extract_pdf(helvetica_page(b"\n".join([title, stamp, body])), max_pages=5)
    found = [block.text for block in document.blocks if block.kind is BlockKind.HEADING]
    assert found == ["A Title in Larger Type"]


def test_short_capitals_are_a_heading_unless_in_a_form_s_small_type() -> None:
    lines: list[Typeset] = [
        *BODY[:6], GAP, ("REFERENCES", 10.0, "regular"), GAP, *BODY[6:10], GAP,
        ("PAY TO THE", 6.0, "regular"), GAP, *BODY[10:12], GAP,
        ("Acknowledgments", 7.0, "caps"), GAP, *BODY[12:],
    ]  # fmt: skip
    # Small capitals' letters are small: their font's name tells them from a form's labels.
    assert headings(lines) == ["REFERENCES", "Acknowledgments"]


def test_a_larger_title_may_end_in_an_exclamation_or_a_colon() -> None:
    lines: list[Typeset] = [
        ("Lets swim!", 16.0, "regular"), GAP, *BODY[:5], GAP,
        ("These are a few of my favourite things:", 16.0, "bold"), GAP, *BODY[5:10], GAP,
        # In the body's size, a bold line ending so introduces what follows: no heading.
        ("Also, do not forget:", 11.0, "bold"), *BODY[10:],
    ]  # fmt: skip
    assert headings(lines) == ["Lets swim!", "These are a few of my favourite things:"]


def test_a_sentence_ending_in_an_ideographic_full_stop_is_no_heading() -> None:
    # "~" reads as "。" in this font: a sentence in larger type, as a Japanese manual's
    # callout "2 タイプのデバイスファイルがあります。" is.
    lines: list[Typeset] = [
        ("Two kinds of device file exist~", 16.0, "ideographic"), GAP, *BODY[:7], GAP,
        ("Device files", 16.0, "ideographic"), GAP, *BODY[7:],
    ]  # fmt: skip
    assert headings(lines) == ["Device files"]


def test_headings_stacked_in_falling_sizes_with_little_space_are_each_a_heading() -> None:
    # A clipping's section name, its dateline and an article's title wrapped over two lines:
    # four heading lines in a row, parted by a change of size or by space measured in the
    # smaller type, not one emphasised paragraph.
    small_gap: Typeset = ("", 6.0, "regular")
    lines: list[Typeset] = [
        *BODY[:4], GAP,
        ("Press Centre", 21.0, "bold"), ("Reports", 15.0, "bold"), GAP,
        ("The Water Partnership May Invest", 14.0, "bold"),
        ("in the Water Works of Omsk", 14.0, "bold"), GAP, *BODY[4:8], GAP,
        ("Business News", 21.0, "bold"), small_gap,
        ("Dateline Twelfth of April", 11.0, "bold"), small_gap,
        ("Moodys Rates the Water Company", 14.0, "bold"),
        ("on the National Scale", 14.0, "bold"), GAP, *BODY[8:],
    ]  # fmt: skip
    found = headings(lines)
    assert "Reports" in found
    assert "The Water Partnership May Invest in the Water Works of Omsk" in found
    assert "Business News" in found
    assert "Moodys Rates the Water Company on the National Scale" in found


def test_a_page_set_in_a_second_larger_body_size_gives_its_lines_no_heading() -> None:
    # Clippings: two pages of 9-point articles, then a page of a 12-point one, whose short
    # lines ("Main page / Siberia", a place name in capitals) are its body, not larger type.
    clipping = "Line {} of a clipping set in small type for the press review"
    small: list[Typeset] = [(clipping.format(n), 9.0, "regular") for n in range(45)]
    large: list[Typeset] = [
        ("Main page / Siberia", 12.0, "regular"), GAP,
        ("Water Works Get a Rating", 16.0, "bold"), GAP,
        *[(f"Line {n} of an article set in the larger type of its page", 12.0, "regular")
          for n in range(16)],
        GAP, ("KEMEROVO", 12.0, "regular"), GAP,
        *[(f"Line {n} of the next article in the same larger type", 12.0, "regular")
          for n in range(16)],
    ]  # fmt: skip
    found = headings(small, small, large)
    assert found == ["Water Works Get a Rating"]


def test_a_bold_name_centred_in_a_diagram_s_box_is_no_heading() -> None:
    # Courier: 0.6 of the size a letter, so a line is centred at x by starting half its
    # width to the left. A class box: its stereotype, its bold name right under it, centred,
    # then its attributes; beside a bold heading set at the text's left edge.
    def at(x: float, y: float, text: str, font: bytes = b"/F1") -> bytes:
        return b"BT %s 10 Tf %g %g Td (%s) Tj ET" % (font, x, y, text.encode())

    def centred(y: float, text: str, font: bytes = b"/F1") -> bytes:
        return at(300 - len(text) * 3, y, text, font)

    body = [
        at(72, 700 - 12 * n, f"Body line {n} of a paragraph in the usual type") for n in range(12)
    ]
    content = [
        *body,
        at(72, 540, "Results", b"/F2"),
        at(72, 522, "Body line after the heading, in the usual type of the text"),
        centred(480, "<<spatialDescriptiveEvol>>"),
        centred(470, "NetworkLinearFlow", b"/F2"),
        centred(460, "- Isolated: boolean"),
        centred(450, "- FlowDirection: CL_DirectionFlag"),
    ]
    fonts = [
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Courier-Bold >>",
    ]
    document = extract_pdf(fonts_page(b"\n".join(content), fonts), max_pages=5)
    found = [block.text for block in document.blocks if block.kind is BlockKind.HEADING]
    assert found == ["Results"]


def test_an_unnumbered_heading_a_half_point_larger_in_another_family_is_a_heading() -> None:
    # A journal's "Acknowledgments" in 11.5-point sans over 11-point serif text: neither
    # bold nor larger by `LARGER`, only the family and the half point tell it.
    serif: list[Typeset] = [(line[0], line[1], "serif") for line in BODY]
    lines: list[Typeset] = [
        *serif[:6], GAP, ("Acknowledgments", 11.5, "regular"), GAP, *serif[6:10], GAP,
        # In the body's own size, a line in the other family is no heading without a number.
        ("Review of the Data", 11.0, "regular"), GAP, *serif[10:],
    ]  # fmt: skip
    assert headings(lines) == ["Acknowledgments"]


def test_a_release_number_in_heading_type_is_a_heading() -> None:
    # A changelog's releases: bare numbers in larger type, a dated one in the body's size
    # but bold and set apart by space; one under another heading of its style is cut from
    # it, and two releases of one day are no banner repeated.
    lines: list[Typeset] = [
        ("Release Notes", 16.0, "bold"), GAP, ("1.3.1 (June 12, 2026)", 16.0, "bold"), GAP,
        *BODY[:2], GAP, ("0.13.8", 16.0, "bold"), GAP, ("Fixed", 11.0, "bold"), GAP,
        *BODY[2:4], GAP, ("0.13.7", 16.0, "bold"), GAP, ("Fixed", 11.0, "bold"), GAP,
        *BODY[4:6], GAP, ("1.0.0 (2020-01-01)", 11.0, "bold"), GAP, *BODY[6:8], GAP,
        ("0.52.1 (January 18, 2026)", 16.0, "bold"), GAP, *BODY[8:9], GAP,
        ("0.52.0 (January 18, 2026)", 16.0, "bold"), GAP, *BODY[9:10], GAP,
        # Not a page number, a figure's number, nor a number in the body's type or bold
        # inside a paragraph.
        ("12", 16.0, "bold"), GAP, ("3.1", 16.0, "bold"), GAP, *BODY[10:11], GAP,
        ("2.0.1", 11.0, "regular"), GAP, *BODY[11:12], ("0.9.1", 11.0, "bold"), *BODY[12:],
    ]  # fmt: skip
    assert headings(lines) == [
        "Release Notes", "1.3.1 (June 12, 2026)", "0.13.8", "Fixed", "0.13.7", "Fixed",
        "1.0.0 (2020-01-01)", "0.52.1 (January 18, 2026)", "0.52.0 (January 18, 2026)",
    ]  # fmt: skip


def test_a_bold_line_opening_in_lower_case_is_a_heading_only_set_apart() -> None:
    # A column's name as a heading ("span_name"), in code type, space above and below it;
    # bold words in lower case inside a paragraph, or with the paragraph going on right
    # under them, are a cross-reference; in the body's family, or in more than three words,
    # a table's header row ("content meaning") or a bold phrase.
    lines: list[Typeset] = [
        *BODY[:4], GAP, ("span_name", 11.0, "code"), GAP, *BODY[4:6],
        ("set dashtype (p. 142)", 11.0, "code"), *BODY[6:8], GAP,
        ("see also colors", 11.0, "code"), *BODY[8:10], GAP,
        ("content meaning", 11.0, "bold"), GAP, *BODY[10:12], GAP,
        ("save fit replaces deprecated command update", 11.0, "code"), GAP, *BODY[12:],
    ]  # fmt: skip
    assert headings(lines) == ["span_name"]


def test_a_larger_clause_ending_in_a_colon_is_no_heading() -> None:
    # A sentence leading into a sample, in heading type (a Markdown comment read as a
    # heading): a clause break before its colon tells it from a title ("Press centre:").
    lines: list[Typeset] = [
        *BODY[:5], GAP, ("In this case, we set it to 262144:", 16.0, "bold"), GAP,
        *BODY[5:10], GAP, ("Press centre:", 16.0, "bold"), GAP, *BODY[10:],
    ]  # fmt: skip
    assert headings(lines) == ["Press centre:"]
