"""Where sentences end in plain text, for the chunker's sentence-level cuts and overlaps.

A sentence ends at `.`, `!`, `?`, `…` (or CJK `。！？`), after any closing quotes or brackets,
before whitespace (CJK needs none) and a next sentence that does not open in lower case. A
period is not an end after a known abbreviation ("Dr."), an initial ("J.", "U.S."), a list
number opening a line ("4.2.") or ". . ." leaders. All positions are offsets into the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# Sentence punctuation, closing quotes/brackets (group 1), whitespace (group 2); Latin needs
# the whitespace, CJK does not. (A bare class first lets the regex engine skip ahead fast.)
_SENTENCE_END = re.compile(r"[.!?…。！？][.!?…。！？]*+([\"'”’»)\]」』）]*+)(\s*+)")
_CJK_ENDS = frozenset("。！？")
_ABBREVIATIONS = frozenset(
    "mr mrs ms mme mlle dr prof sr jr st mt vs cf fig figs eq eqs approx ca no nos vol vols pp "
    "sec ch al gen col capt lt sgt gov rev hon".split()
)
_INITIALS = re.compile(r"[A-Z]|(?:[A-Za-z]\.)+[A-Za-z]")  # "J.", "U.S.", "e.g.", "i.e."
_NUMBERING = re.compile(r"\d{1,3}(?:\.\d{1,3})*")  # "1." or "4.2." opening a line
_MAX_ABBREVIATION = 12
_OPENERS = "(\"'“‘[«"


def sentence_cuts(text: str, lo: int, hi: int) -> Iterator[tuple[int, int]]:
    """Yield the `(piece_end, next_start)` of each sentence end inside `[lo, hi)`."""
    for match in _SENTENCE_END.finditer(text, lo, hi):
        if match.end() >= hi:
            return
        if ends_sentence(text, lo, match):
            yield match.start(2), match.end()


def first_sentence_start(text: str, lo: int, hi: int, earliest: int) -> int | None:
    """Return the first start of a sentence in `[lo, hi)` at or after `earliest`, if any."""
    search, position = _SENTENCE_END.search, max(lo, earliest - 8)
    while (match := search(text, position, hi)) is not None:
        position = match.end()
        if position >= hi:
            return None
        if position >= earliest and ends_sentence(text, lo, match):
            return position
    return None


def ends_sentence(text: str, lo: int, match: re.Match[str]) -> bool:
    """Tell a sentence end from an abbreviation, initial, list number or "3.14"."""
    if text[match.start(1) - 1] in _CJK_ENDS:
        return True
    period, space, next_start = match.start(), match.start(2), match.end()
    if space == next_start or text[next_start].islower():
        return False
    if space != period + 1 or text[period] != ".":  # "?", "...", closing quote
        return True
    before = text[max(lo, period - _MAX_ABBREVIATION - 1) : period]
    if not before or before[-1].isspace():  # a period after whitespace: ". . ." leaders
        return False
    word = before.split()[-1]
    if len(word) > _MAX_ABBREVIATION:
        return True
    word = word.lstrip(_OPENERS)
    if not word or word.lower() in _ABBREVIATIONS:
        return False
    if word[0].isdigit():
        if not _NUMBERING.fullmatch(word):
            return True
        line_start = period - len(word)
        while line_start > lo and text[line_start - 1] in " \t":
            line_start -= 1
        return not (line_start == lo or text[line_start - 1] == "\n")
    return not ((len(word) == 1 or "." in word) and _INITIALS.fullmatch(word))
