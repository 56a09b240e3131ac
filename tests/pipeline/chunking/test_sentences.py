"""Sentence ends: where the chunker may cut, and where an overlap may start."""

from __future__ import annotations

import pytest

from docingest.pipeline.chunking.sentences import first_sentence_start, sentence_cuts


def _pieces(text: str, lo: int = 0, hi: int | None = None) -> list[str]:
    """The text up to each cut in `[lo, hi)`, and the rest, as the chunker would see them."""
    hi = len(text) if hi is None else hi
    pieces, start = [], lo
    for piece_end, next_start in sentence_cuts(text, lo, hi):
        pieces.append(text[start:piece_end])
        start = next_start
    return [*pieces, text[start:hi]]


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("One. Two! Three? Four… Five.", ["One.", "Two!", "Three?", "Four…", "Five."]),
        ("Wait... Then it rained.", ["Wait...", "Then it rained."]),
        ('He said "stop." Then he left.', ['He said "stop."', "Then he left."]),
        ("It ended (at last.) Next one.", ["It ended (at last.)", "Next one."]),
        ('It ended. "Next," she said.', ["It ended.", '"Next," she said.']),
        ("End of a line.\nNext line.", ["End of a line.", "Next line."]),
        ("東京です。大阪です！京都？", ["東京です。", "大阪です！", "京都？"]),
    ],
)
def test_sentences_end_at_their_punctuation_and_closers(text: str, pieces: list[str]) -> None:
    assert _pieces(text) == pieces


@pytest.mark.parametrize(
    "text",
    [
        "Dr. Watson and Mrs. Hudson met Prof. Moriarty.",
        "See Fig. 3 and No. 5 in the appendix.",
        "A letter from J. Smith of the U.S. Army arrived.",
        "Rivers, e.g. the Rhine, i.e. Europe's, flow.",
        "Pi is 3.14 and e is 2.72 roughly.",
        "It was late. then the lights went out.",  # the next one opens in lower case
        "Wait... then it rained.",
        "Contents . . . . 12",  # leaders
        "Go to the (Dr. Who) exhibit.",  # an abbreviation after an opening bracket
    ],
)
def test_no_cut_at_abbreviations_initials_decimals_or_lower_case(text: str) -> None:
    assert _pieces(text) == [text]


def test_a_list_number_opening_a_line_is_no_sentence_end() -> None:
    text = "Scope of work.\n4.2. Delivery dates.\n  4.3. Penalties apply."
    assert _pieces(text) == ["Scope of work.", "4.2. Delivery dates.", "4.3. Penalties apply."]
    # The same number inside a line ends a sentence: "10.2." is a version, not a list item.
    assert _pieces("We ship version 10.2. Done today.") == ["We ship version 10.2.", "Done today."]


def test_the_start_of_the_range_counts_as_a_line_start() -> None:
    text = "see 4.2. Delivery dates apply."
    assert _pieces(text) == ["see 4.2.", "Delivery dates apply."]
    assert _pieces(text, lo=4) == ["4.2. Delivery dates apply."]


def test_a_word_longer_than_any_abbreviation_ends_its_sentence() -> None:
    assert _pieces("Supercalifragilistic. Next.") == ["Supercalifragilistic.", "Next."]


def test_cuts_are_offsets_into_the_text_within_the_range() -> None:
    text = "Before. One two. Three four. After."
    lo, hi = text.index("One"), text.index("After")
    cuts = list(sentence_cuts(text, lo, hi))
    assert cuts == [(text.index(" Three"), text.index("Three"))]
    # An end whose next sentence starts at or past `hi` is no cut inside the range.
    assert list(sentence_cuts(text, lo, text.index("Three"))) == []
    assert list(sentence_cuts(text, lo, text.index("Three") + 1)) == cuts


def test_the_first_sentence_start_at_or_after_earliest() -> None:
    text = "One two. Three four. Five six."
    three, five = text.index("Three"), text.index("Five")
    assert first_sentence_start(text, 0, len(text), 0) == three
    assert first_sentence_start(text, 0, len(text), three) == three
    assert first_sentence_start(text, 0, len(text), three + 1) == five
    assert first_sentence_start(text, 0, len(text), five + 1) is None  # only the text's end
    assert first_sentence_start(text, 0, five, 0) == three
    assert first_sentence_start(text, 0, five, three + 1) is None  # "Five" is past `hi`
    assert first_sentence_start("Dr. Watson and Mr. Holmes.", 0, 26, 0) is None
