"""How long a piece of text is: in characters or in tokens of the embedding model's tokenizer.

The chunker asks "how long is `text[start:end]`?" for every candidate piece and every growing
chunk. Tokenising each candidate separately would tokenise every character many times over
(langchain's token splitters do exactly that). Instead a `LengthFunction` can `measure_spans`:
the document's blocks are tokenised once, in one parallel `encode_batch`, keeping each
token's start offset in the full text; the length of any span is then the number of tokens
starting inside it, two binary searches away. Each character is tokenised once (once more
where a chunk must be re-counted, below).

For a tokenizer whose pre-tokenizer splits at whitespace and punctuation and never looks
further (the bundled WordPiece one: `BertPreTokenizer`), that count is exactly what
tokenising the span alone gives when both ends of the span sit at such a boundary, which is
where the chunker cuts; `SpanLength.exact_at` says so. Elsewhere (a cut inside a long word,
or a byte-level BPE / SentencePiece tokenizer, where a word's token depends on the space
before it) the count can be off by a token or two at the edges, so the chunker re-counts
such chunks on their own text and shrinks any that overflow.

A token counts as one per `MAX_TOKEN_CHARS` characters it covers. Real tokens are far
shorter, but a tokenizer maps a word it cannot split to one unknown token (WordPiece: any
word over 100 characters), so a run of such words would otherwise make one "token-sized"
chunk of megabytes, answered whole in every search hit.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_left
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from tokenizers import Tokenizer, normalizers, pre_tokenizers

from docingest.pipeline.settings import ChunkUnit

MAX_TOKEN_CHARS = 16
"""Characters one token may stand for when measuring (see the module's docstring): a
chunk of `n` tokens holds at most `16 n` characters. Tokens of real text average 3-6."""

DEFAULT_TOKENIZER_PATH = Path(__file__).parent.parent / "resources" / "minilm-l6-v2-tokenizer.json"
"""The all-MiniLM-L6-v2 WordPiece tokenizer shipped with the package."""


class SpanLength(Protocol):
    """Lengths of spans of one text, prepared by `LengthFunction.measure_spans`."""

    def __call__(self, start: int, end: int) -> int:
        """Return the length of `text[start:end]`."""
        ...

    def end_within(self, start: int, budget: int) -> int:
        """Return the largest `end` for which `self(start, end) <= budget`."""
        ...

    def start_within(self, end: int, budget: int) -> int:
        """Return the smallest `start` for which `self(start, end) <= budget`."""
        ...

    def exact_at(self, position: int) -> bool:
        """Tell whether spans starting or ending at `position` are measured exactly."""
        ...


class LengthFunction(Protocol):
    """Measures text in one unit: callable on a string, with faster batch and span forms."""

    def __call__(self, text: str) -> int:
        """Return the length of `text`."""
        ...

    def batch(self, texts: Sequence[str]) -> list[int]:
        """Return the length of each text."""
        ...

    def measure_spans(self, text: str, regions: Sequence[tuple[int, int]]) -> SpanLength:
        """Prepare span lengths of `text`, reading only `regions` (sorted, disjoint)."""
        ...


class _CharSpans:
    def __call__(self, start: int, end: int) -> int:
        return end - start

    def end_within(self, start: int, budget: int) -> int:
        return start + budget

    def start_within(self, end: int, budget: int) -> int:
        return max(end - budget, 0)

    def exact_at(self, position: int) -> bool:
        return True


class CharLength:
    """Length in Unicode code points (`len`)."""

    def __call__(self, text: str) -> int:
        return len(text)

    def batch(self, texts: Sequence[str]) -> list[int]:
        return [len(text) for text in texts]

    def measure_spans(self, text: str, regions: Sequence[tuple[int, int]]) -> SpanLength:
        return _CharSpans()


char_length = CharLength()
"""The character `LengthFunction`."""


# Whitespace that both Python (`str.isspace`) and the Bert pre-tokenizer split words at: ASCII
# blanks and the Unicode space separators (category Zs). Python also counts \x0b, \x0c and
# \x1c-\x1f as whitespace, but the Bert normaliser deletes them, joining the words around them.
_SHARED_WHITESPACE = frozenset(
    " \t\n\r\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u202f\u205f\u3000"
)


def _is_punctuation(char: str) -> bool:
    """Tell whether the Bert pre-tokenizer makes `char` a word of its own."""
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


class _TokenSpans:
    """Token counts of spans from the sorted start offsets of the text's tokens."""

    def __init__(self, text: str, starts: list[int], *, word_bounded: bool) -> None:
        self._text = text
        self._starts = starts
        self._word_bounded = word_bounded

    def __call__(self, start: int, end: int) -> int:
        return bisect_left(self._starts, end) - bisect_left(self._starts, start)

    def end_within(self, start: int, budget: int) -> int:
        # The span may hold the tokens from the first starting at `start` up to `budget` of them.
        stop = bisect_left(self._starts, start) + budget
        return self._starts[stop] if stop < len(self._starts) else len(self._text)

    def start_within(self, end: int, budget: int) -> int:
        before = bisect_left(self._starts, end) - budget - 1  # last token that must stay out
        return self._starts[before] + 1 if before >= 0 else 0

    def exact_at(self, position: int) -> bool:
        text = self._text
        if not self._word_bounded:
            return False
        if position <= 0 or position >= len(text):
            return True
        before, after = text[position - 1], text[position]
        if before in _SHARED_WHITESPACE or after in _SHARED_WHITESPACE:
            return True
        return _is_punctuation(before) and not _is_punctuation(after)


def last_fitting(
    length: LengthFunction, text: str, start: int, ends: Sequence[int], budget: int
) -> int:
    """Return the index of the last of the ascending `ends` with `length(text[start:end])`
    within `budget`, by bisection (-1: none). Measures each candidate alone, so it is exact
    but slow: for the rare spans whose span length is not exact."""
    low, high = 0, len(ends)
    while low < high:
        middle = (low + high) // 2
        if length(text[start : ends[middle]]) <= budget:
            low = middle + 1
        else:
            high = middle
    return low - 1


@lru_cache(maxsize=8)
def load_tokenizer(path: Path) -> Tokenizer:
    """Load a tokenizer.json once per process, with truncation and padding switched off."""
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


class TokenCounter:
    """Length in tokens of a `tokenizers.Tokenizer`, without special tokens or truncation.

    The tokenizer is loaded from `tokenizer_path` (default: the bundled MiniLM one) on first
    use and shared by every counter of the same file.
    """

    def __init__(self, tokenizer_path: Path | None = None) -> None:
        self._path = tokenizer_path or DEFAULT_TOKENIZER_PATH
        self._tokenizer: Tokenizer | None = None
        self._word_bounded: bool | None = None

    @classmethod
    def from_tokenizer(cls, tokenizer: Tokenizer) -> TokenCounter:
        """Count with an already built tokenizer (its truncation and padding are switched off)."""
        tokenizer.no_truncation()
        tokenizer.no_padding()
        counter = cls()
        counter._tokenizer = tokenizer
        return counter

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self._path)
        return self._tokenizer

    @property
    def word_bounded(self) -> bool:
        """Whether words split at whitespace and punctuation are tokenised each on its own."""
        if self._word_bounded is None:
            tokenizer = self.tokenizer
            pre_tokenizer, normalizer = tokenizer.pre_tokenizer, tokenizer.normalizer
            self._word_bounded = isinstance(pre_tokenizer, pre_tokenizers.BertPreTokenizer) and (
                normalizer is None or isinstance(normalizer, normalizers.BertNormalizer)
            )
        return self._word_bounded

    def __call__(self, text: str) -> int:
        return _counted(self.tokenizer.encode(text, add_special_tokens=False).offsets)

    def batch(self, texts: Sequence[str]) -> list[int]:
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [_counted(encoding.offsets) for encoding in encodings]

    def measure_spans(self, text: str, regions: Sequence[tuple[int, int]]) -> SpanLength:
        encodings = self.tokenizer.encode_batch(
            [text[start:end] for start, end in regions], add_special_tokens=False
        )
        starts: list[int] = []
        for (region_start, _), encoding in zip(regions, encodings, strict=True):
            for token_start, token_end in encoding.offsets:
                # A long token counts once per MAX_TOKEN_CHARS: a start for each.
                first = region_start + token_start
                starts.extend(range(first, region_start + token_end, MAX_TOKEN_CHARS) or [first])
        starts.sort()  # offsets are in order within a region; this only guards odd normalisers
        return _TokenSpans(text, starts, word_bounded=self.word_bounded)


def _counted(offsets: Sequence[tuple[int, int]]) -> int:
    """Tokens of an encoding with these offsets, a long one counted once per MAX_TOKEN_CHARS."""
    return sum(max(1, -(-(end - start) // MAX_TOKEN_CHARS)) for start, end in offsets)


@lru_cache(maxsize=8)
def _token_counter(path: Path | None) -> TokenCounter:
    return TokenCounter(path)


def length_function_for(unit: ChunkUnit, tokenizer_path: Path | None = None) -> LengthFunction:
    """Return the length function for `unit` (tokens: of the tokenizer at `tokenizer_path`)."""
    if unit is ChunkUnit.CHARS:
        return char_length
    return _token_counter(tokenizer_path)
