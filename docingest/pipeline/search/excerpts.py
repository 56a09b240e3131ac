"""The part of a chunk that answers a query: its highlights and its excerpt.

Both read the chunk with the keyword analyzer's own tokenization
(`docingest.pipeline.sparse.term_spans`), so a highlight is exactly a term search matched: a stem
("running" for "runs"), an identifier or one of its parts, a CJK bigram. No second analyzer, no
JavaScript word matching.

The excerpt is the window of one to three consecutive sentences (the chunker's sentence
splitter, `docingest.pipeline.chunking.sentences`, inside paragraphs) holding the most query-term
weight. A term weighs log(1 + sentences / sentences holding it), an IDF over the chunk's own
sentences, since Qdrant keeps the corpus IDF to itself: a term in every sentence tells the windows
apart least. A window grows past one sentence only to hold more weight, and past `EXCERPT_MAX_CHARS`
never. A single sentence longer than that (a megabyte on one line) is cut to the
`EXCERPT_MAX_CHARS` of it holding the most query-term weight, at word boundaries where it has
them, so an excerpt is small whatever the chunk. With no query term in the chunk (a hit by
meaning alone) the excerpt is its first sentence, cut the same way.

Highlights are at most `MAX_HIGHLIGHTS` per chunk: those in the excerpt first, then the
chunk's first others, in text order (a term repeated on every line would otherwise give
thousands of spans per hit).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Collection
from dataclasses import dataclass

from docingest.pipeline.chunking.sentences import sentence_cuts
from docingest.pipeline.sparse import TermSpan, analyze, term_spans

MAX_SENTENCES = 3
"""Sentences an excerpt holds at most (the contract's "one to three")."""
EXCERPT_MAX_CHARS = 600
"""Characters an excerpt spans at most (a longer single sentence is cut to this)."""
MAX_HIGHLIGHTS = 64
"""Highlighted spans per chunk at most."""
_WORD_SNAP = 40
"""How far a cut sentence's window edge may move to fall between words."""

_PARAGRAPH = re.compile(r"\n[^\S\n]*\n\s*")
"""A blank line: sentences never run across one (a heading has no full stop)."""

Span = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Answer:
    """What `answer` found in one chunk: the excerpt's span and the highlighted spans."""

    excerpt: Span
    highlights: list[Span]


def query_terms(query: str) -> frozenset[str]:
    """Return the distinct terms of `query` after analysis."""
    return frozenset(analyze(query))


def sentences(text: str) -> list[Span]:
    """Return the spans of `text`'s sentences, stripped, in order (paragraphs cut too)."""
    spans: list[Span] = []
    position = 0
    for paragraph_end, next_start in [
        *((m.start(), m.end()) for m in _PARAGRAPH.finditer(text)),
        (len(text), len(text)),
    ]:
        lo, hi = _strip(text, position, paragraph_end)
        if lo < hi:
            start = lo
            for end, following in sentence_cuts(text, lo, hi):
                spans.append((start, end))
                start = following
            spans.append((start, hi))
        position = next_start
    return spans


def _strip(text: str, lo: int, hi: int) -> Span:
    while lo < hi and text[lo].isspace():
        lo += 1
    while hi > lo and text[hi - 1].isspace():
        hi -= 1
    return lo, hi


def highlights(spans: list[TermSpan], terms: Collection[str]) -> list[Span]:
    """Return the spans of the terms in `terms`, merged where they overlap or touch."""
    merged: list[list[int]] = []
    for term, start, end in spans:
        if term not in terms:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def bounded_highlights(highlighted: list[Span], excerpt: Span) -> list[Span]:
    """Return at most `MAX_HIGHLIGHTS` of `highlighted`: those inside `excerpt` first, then the
    others from the start, in text order."""
    if len(highlighted) <= MAX_HIGHLIGHTS:
        return highlighted
    lo, hi = excerpt
    inside = [span for span in highlighted if span[0] < hi and span[1] > lo][:MAX_HIGHLIGHTS]
    kept = set(inside)
    others = (span for span in highlighted if span not in kept)
    rest = [span for _, span in zip(range(MAX_HIGHLIGHTS - len(inside)), others, strict=False)]
    return sorted(inside + rest)


def best_window(text: str, spans: list[TermSpan], terms: Collection[str]) -> Span:
    """Return the excerpt of `text`: the best window of one to three sentences, at most
    `EXCERPT_MAX_CHARS` long."""
    lo, hi = _best_sentences(text, spans, terms)
    if hi - lo <= EXCERPT_MAX_CHARS:
        return lo, hi
    return _cut(text, [s for s in spans if s[0] in terms and lo <= s[1] and s[2] <= hi], lo, hi)


def _cut(text: str, spans: list[TermSpan], lo: int, hi: int) -> Span:
    """Return the `EXCERPT_MAX_CHARS` of the long sentence `text[lo:hi]` holding the most
    distinct query terms of `spans` (its start without any), its edges moved between words."""
    start, best, held = lo, 0, 0
    count: dict[str, int] = {}
    first = 0
    for last, (term, _, term_end) in enumerate(spans):  # two pointers over the matches
        count[term] = count.get(term, 0) + 1
        held += count[term] == 1
        while first < last and term_end - spans[first][1] > EXCERPT_MAX_CHARS:
            gone = spans[first][0]
            count[gone] -= 1
            held -= count[gone] == 0
            first += 1
        if held > best:
            best, start = held, spans[first][1]
    slack = EXCERPT_MAX_CHARS // 4 if best else 0  # lead in to the first match
    start = max(lo, min(start - slack, hi - EXCERPT_MAX_CHARS))
    end = start + EXCERPT_MAX_CHARS
    if start > lo:
        gap = text.find(" ", start, start + _WORD_SNAP)
        start = gap + 1 if gap >= 0 else start
    if end < hi:
        gap = text.rfind(" ", end - _WORD_SNAP, end)
        end = gap if gap > start else end
    return _strip(text, start, end)


def _best_sentences(text: str, spans: list[TermSpan], terms: Collection[str]) -> Span:
    """Return the best window of one to three sentences of `text` (a sentence whole)."""
    parts = sentences(text)
    if not parts:
        return 0, len(text)
    starts = [start for start, _ in parts]
    found: list[set[str]] = [set() for _ in parts]
    for term, start, _ in spans:
        if term in terms:
            found[max(bisect_right(starts, start) - 1, 0)].add(term)
    counts: dict[str, int] = {}
    for held in found:
        for term in held:
            counts[term] = counts.get(term, 0) + 1
    if not counts:
        return parts[0]
    weight = {term: math.log1p(len(parts) / count) for term, count in counts.items()}
    best, best_score = parts[0], 0.0
    for size in range(1, MAX_SENTENCES + 1):  # smaller windows first: they win ties
        for first in range(len(parts) - size + 1):
            lo, hi = parts[first][0], parts[first + size - 1][1]
            if size > 1 and hi - lo > EXCERPT_MAX_CHARS:
                continue
            held = set().union(*found[first : first + size])
            score = sum(weight[term] for term in held)
            if score > best_score + 1e-9:
                best, best_score = (lo, hi), score
    return best


def answer(text: str, terms: Collection[str]) -> Answer:
    """Return the excerpt and highlights of chunk `text` for a query of `terms`."""
    spans = term_spans(text) if terms else []
    excerpt = best_window(text, spans, terms)
    return Answer(excerpt, bounded_highlights(highlights(spans, terms), excerpt))


def within(highlighted: list[Span], window: Span) -> list[Span]:
    """Return the highlights inside `window`, shifted to offsets into it."""
    lo, hi = window
    return [
        (max(start, lo) - lo, min(end, hi) - lo)
        for start, end in highlighted
        if start < hi and end > lo
    ]
