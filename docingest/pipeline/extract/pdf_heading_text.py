"""What a heading's words may look like: a title's length and ending, not a caption, a
contents line or an admonition's label; the depth its section number gives."""

from __future__ import annotations

import re

MAX_HEADING_CHARS = 150
MAX_HEADING_WORDS = 18
_CAPTION = re.compile(
    r"^(?:fig(?:ure)?|table|tab|listing|algorithm|chart|exhibit|plate|source|note)s?\.?\s*"
    r"(?-i:\d|[A-Z][\dIVX]*(?![a-z]))",  # "Table 3", "Exhibit A": not "Tables of data", "Sources"
    re.IGNORECASE,
)
LEADERS = re.compile(
    r"(?:(?:\.\s?){3,}|…|\s{2,}|_{3,})\s*[\dixvlc]+$|[^\W\d_]\d{1,3}[-–]\d{1,4}$", re.I
)
"""A contents line: leaders before its page number, or a "3-9" page glued to its title."""
_PAGE_NUMBER = re.compile(r"(?<!,)\s\d{1,4}$")
"""A contents line without leaders ("Introduction 7"), unless the title wraps on."""
CHAPTER = re.compile(r"^(chapter|part|appendix|annex|section)\s+(\w{1,6})\.?(?:\s+|$)", re.I)
_DOTTED = re.compile(r"^(\d{1,3}(?:\.\d{1,3}){0,5})\.?(?:\s+(?=[^\W\d_\"'“(])|$)")
LETTERED = re.compile(r"^([A-Z])(?:\.(\d{1,3}(?:\.\d{1,3}){0,4})\.?|[.)])\s+(?=[^\W\d_])")
ROMAN = re.compile(r"^([IVX]{1,6})[.)]\s+(?=[^\W\d_])")
_ADMONITIONS = frozenset(
    "note notes tip tips hint warning caution important attention danger remark example".split()
)
_BULLET = re.compile(r"^[•◦▪●○■□►➢\uf0a7\uf0b7\-–—*]")
_ENDS_CLAUSE = (".", ",", ";", ":", "!", "?", "。", "、", "，", "；", "：", "！", "？")
_CALLS_OUT = ("?", "!", ":", "？", "！", "：")
"""A title in larger type may end so ("What is Debian?", "Let's swim!", "Press centre:")."""
_BLANK_PAGE = re.compile(r"intentionally\s+(?:left\s+)?blank", re.IGNORECASE)
_SUFFIX = r"(?:[a-z]{1,5}\d{0,3})?(?:[-.+][a-z]{0,5}\d{0,3}){0,2}"
"""A pre- or post-release's tag ("rc1", ".post1"): one way to match, so no backtracking runs
away on a line of letters after a number."""
RELEASE = re.compile(
    rf"v\d{{1,4}}(?:\.\d{{1,3}}){{1,3}}{_SUFFIX}|\d{{1,4}}(?:\.\d{{1,3}}){{2,3}}{_SUFFIX}"
    rf"|\d{{1,4}}(?:\.\d{{1,3}}){{1,3}}{_SUFFIX}\s+(?:\([^()]{{1,40}}\)|[-–—]\s[\d./-]{{6,10}})",
    re.IGNORECASE,
)
"""A release's number, to be matched whole: "v2.1", "0.13.8", "1.0.0 (2020-01-01)",
"1.0 - 2020-01-01"; not a bare "3.1" (a figure's, a section's number), a page number nor a
date ("12.04.2006")."""


def reads_like_title(
    text: str,
    *,
    question: bool = False,
    larger: bool = False,
    wraps: bool = False,
    standout: bool = False,
) -> bool:
    """Whether `text` could be a title; ending in "?" only if `question` ("Are All Values
    True?" in a ruled box), also in "!" or ":" if `larger` ("Let's swim!"; not a clause
    "In this case, we set it to 262144:", a sentence leading into a sample); an admonition's
    word only if `larger` ("Notes" over a list of notes); ending in a comma or a number only
    if the title `wraps` onto the next line ("CHAPTER 3 - ADMINISTRATION OF CHAPTER 13" /
    "CASES"), a number also in `standout` type ("Heading Level 1") or in a bare "Chapter 4";
    without a letter only a release's number ("0.13.8") in `standout` type."""
    if not 2 <= len(text) <= MAX_HEADING_CHARS or len(text.split()) > MAX_HEADING_WORDS:
        return False
    if not any(ch.isalpha() for ch in text) and not (standout and RELEASE.fullmatch(text)):
        return False
    if text.endswith(_ENDS_CLAUSE) and not (
        (question and text.endswith(("?", "？")))
        or (larger and text.endswith(_CALLS_OUT) and not (text.endswith(":") and ", " in text))
        or (wraps and text.endswith(","))
    ):
        return False
    if (text.casefold() in _ADMONITIONS and not larger) or _BULLET.match(text):
        return False
    if _BLANK_PAGE.search(text) or _CAPTION.match(text) or LEADERS.search(text):
        return False
    bare_chapter = bool(CHAPTER.fullmatch(text + " "))
    return wraps or standout or bare_chapter or not _PAGE_NUMBER.search(text)


def numbering(text: str) -> int | None:
    """Return the depth a heading's section number gives, None without one (a release's
    number, "0.13.8", is none)."""
    if match := CHAPTER.match(text):
        return 2 if match.group(1).casefold() == "section" else 1
    if (match := _DOTTED.match(text)) and not RELEASE.fullmatch(text):
        return min(match.group(1).count(".") + 1, 6)
    if match := ROMAN.match(text):
        return 1
    if match := LETTERED.match(text):
        sub = match.group(2)
        return min(sub.count(".") + 2, 6) if sub else 1
    return None
