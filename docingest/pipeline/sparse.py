"""Keyword term vectors for Qdrant sparse vectors with the IDF modifier (BM25 split in two).

Qdrant computes IDF server-side from the collection (`modifier: idf`), so a document vector
carries only BM25's term-frequency part, tf*(k1+1) / (tf + k1*(1 - b + b*len/AVG_LEN)), and a
query vector carries weight 1.0 per unique term; the dot product Qdrant takes is then BM25.

The average chunk length (in terms) is fixed per index, because the corpus average is unknown
when a chunk is written (and drifts as documents come and go); Qdrant's own fastembed
"Qdrant/bm25" fixes it at 256. Ours follows the index's chunk size, at the terms per character
(`TERMS_PER_CHAR`) or per token (`TERMS_PER_TOKEN`) that chunks of the sample corpus's English
documents hold after stop words (BENCHMARKS.md, "Retrieval quality by search mode", has the
counts). A wrong guess scales every chunk's normalisation alike: it only shifts how much long
chunks are penalised.

Analysis (documents and queries alike): NFKC, then Unicode words (`\\w+`, so `snake_case`
stays one token), casefolded, possessive 's dropped, stop words removed, Snowball English
stemming with PyStemmer (the C build of the Snowball stemmers). Stemming raises plain BM25's
nDCG@10 on SciFact (BENCHMARKS.md, "Retrieval quality by search mode"); Snowball rather than
Porter as the maintained successor with fewer over-conflations; English only, since the
stemmer would mangle other languages less than it helps English, and most corpora here are
English.

Identifiers stay searchable as written: a token with a digit or underscore, in ALL CAPS or
camelCase ("ERR_TLS_CERT_ALTNAME_INVALID", "E1234", "HTTPS", "QdrantClient") is indexed
unstemmed as a whole, plus its stemmed parts (split at underscores and case changes), so
"HTTPS" matches "https" exactly (the stemmer alone would make it "http") and "altname invalid"
still finds the error code. This is Lucene's WordDelimiterGraphFilter with preserveOriginal.

Stop words: Lucene's 33-word English list (EnglishAnalyzer's default), small on purpose: IDF
already discounts frequent words; the list only saves space and query work on the commonest.

CJK has no spaces: runs of Han, Hiragana, Katakana and Hangul become overlapping character
bigrams (a lone character stays a unigram), as Lucene's CJKAnalyzer does. Other unspaced
scripts (Thai, Lao, Khmer) stay one token per run.

A term's index is a stable 31-bit hash of its text (blake2b), the same in every process;
Python's `hash()` is salted per process and would scatter terms across workers.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import Stemmer

K1 = 1.2
B = 0.75
TERMS_PER_CHAR = 0.09
TERMS_PER_TOKEN = 0.34
AVG_LEN = 90.0
"""Average length of the default 1000-character chunks, in terms (see the module docstring)."""

STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split()
)

_CJK = (
    "\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff\U00020000-\U0002fa1f"
)
_TOKEN = re.compile(rf"([{_CJK}]+)|((?:(?![{_CJK}])\w)+)")
_RUN = re.compile(rf"[\w{_CJK}]+")
"""A run of word and CJK characters: one or more `_TOKEN`s (one if it is ASCII), and the unit
the analysis remembers; finding runs is several times faster than `_TOKEN` on its own."""
_POSSESSIVE = re.compile(r"['’][sS]\b")
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_]+")
"""Parts of an identifier: acronyms, capitalised words, digit runs (anything else whole)."""


@dataclass(frozen=True, slots=True)
class SparseTerms:
    """A sparse vector: parallel lists of term indexes (unique) and weights."""

    indices: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.indices)


_stemmer = Stemmer.Stemmer("english")


def term_index(term: str) -> int:
    """Return the stable index of `term` in [0, 2**31)."""
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


def average_length(chunk_size: int, unit: str) -> float:
    """Return the assumed average length, in terms, of chunks of `chunk_size` `unit`s."""
    per_unit = TERMS_PER_TOKEN if unit == "tokens" else TERMS_PER_CHAR
    return max(chunk_size * per_unit, 8.0)


def _is_identifier(token: str) -> bool:
    if any(char.isdigit() or char == "_" for char in token):
        return True
    return len(token) > 1 and any(char.isupper() for char in token[1:])


def _cjk_grams(run: str) -> Iterator[str]:
    if len(run) == 1:
        yield run
    else:
        for i in range(len(run) - 1):
            yield run[i : i + 2]


def _stem(word: str) -> str:
    return _stemmer.stemWord(word)


def _word_terms(token: str) -> tuple[str, ...]:
    """Return the terms of one token of `\\w` characters outside CJK runs."""
    word = token.casefold()
    if not _is_identifier(token):
        return () if word in STOP_WORDS else (_stem(word),)
    terms = [] if word in STOP_WORDS else [word]
    parts = [
        _stem(part)
        for part in map(str.casefold, _PARTS.findall(token))
        if part not in STOP_WORDS and (len(part) > 1 or part.isdigit())
    ]
    if parts != [word]:
        terms.extend(parts)
    return tuple(terms)


MEMO_SIZE = 65_536
"""Runs whose terms, and terms whose indexes, are remembered (each memo is emptied when full).
A run's analysis is pure and words recur across chunks, so all but the first occurrence of a
word cost one dictionary lookup instead of the Python checks and stemming per token."""
MEMO_RUN_CHARS = 40
"""Longer runs (CJK sentences, long identifiers) rarely recur and are not remembered."""
_TERMS_OF: dict[str, tuple[str, ...]] = {}
_INDEX_OF: dict[str, int] = {}


def _remember(memo: dict[str, Any], key: str, value: Any) -> Any:
    if len(memo) >= MEMO_SIZE:
        memo.clear()  # thread-safe under the GIL: at worst a value is computed again
    memo[key] = value
    return value


def _run_terms(run: str) -> tuple[str, ...]:
    """Return the terms of one `_RUN`."""
    if run.isascii():
        return _word_terms(run)
    terms: list[str] = []
    for cjk, token in _TOKEN.findall(run):
        terms.extend(_cjk_grams(cjk) if cjk else _word_terms(token))
    return tuple(terms)


def analyze(text: str) -> list[str]:
    """Return the terms of `text`, in order, repeated as often as they occur."""
    text = _POSSESSIVE.sub("", unicodedata.normalize("NFKC", text))
    terms: list[str] = []
    memo = _TERMS_OF
    for run in _RUN.findall(text):
        found = memo.get(run)
        if found is None:
            found = _run_terms(run)
            if len(run) <= MEMO_RUN_CHARS:
                _remember(memo, run, found)
        terms.extend(found)
    return terms


TermSpan = tuple[str, int, int]
"""A term and the `[start, end)` of `text` it was read from."""


def term_spans(text: str) -> list[TermSpan]:
    """Return the terms of `text` as `analyze` finds them, each with where it stands in
    `text`: a word's or identifier's terms span the whole run, a CJK bigram its two
    characters.

    Runs are found in the text as given and normalised one by one, so offsets stay offsets
    into `text`; a run that NFKC changes (a ligature, full-width letters) maps all its terms
    to the whole run. A possessive "'s" yields no term, as `analyze` drops it.
    """
    spans: list[TermSpan] = []
    memo = _TERMS_OF
    for match in _RUN.finditer(text):
        run, start, end = match.group(), match.start(), match.end()
        if run in ("s", "S") and start and _POSSESSIVE.match(text, start - 1):
            continue
        if run.isascii() or (normal := unicodedata.normalize("NFKC", run)) != run:
            key = run if run.isascii() else normal
            found = memo.get(key)
            if found is None:
                found = _run_terms(key)
            spans.extend((term, start, end) for term in found)
            continue
        for token in _TOKEN.finditer(run):
            lo = start + token.start()
            if cjk := token.group(1):
                if len(cjk) == 1:
                    spans.append((cjk, lo, lo + 1))
                else:
                    spans.extend((cjk[i : i + 2], lo + i, lo + i + 2) for i in range(len(cjk) - 1))
            else:
                hi = start + token.end()
                spans.extend((term, lo, hi) for term in _word_terms(token.group(2)))
    return spans


def _terms_to_vector(weights: dict[str, float]) -> SparseTerms:
    merged: dict[int, float] = {}
    memo = _INDEX_OF
    for term, weight in weights.items():  # a hash collision merges two terms (1 in 2**31)
        index = memo.get(term)
        if index is None:
            index = _remember(memo, term, term_index(term))
        merged[index] = merged.get(index, 0.0) + weight
    ordered = sorted(merged.items())
    return SparseTerms([index for index, _ in ordered], [value for _, value in ordered])


def encode_document(text: str, *, avg_len: float = AVG_LEN) -> SparseTerms:
    """Return the BM25 term-frequency weights of `text` (IDF is applied by Qdrant)."""
    terms = analyze(text)
    if not terms:
        return SparseTerms()
    norm = K1 * (1 - B + B * len(terms) / avg_len)
    return _terms_to_vector(
        {term: tf * (K1 + 1) / (tf + norm) for term, tf in Counter(terms).items()}
    )


def encode_query(text: str) -> SparseTerms:
    """Return weight 1.0 for each unique term of `text`."""
    return _terms_to_vector(dict.fromkeys(analyze(text), 1.0))
