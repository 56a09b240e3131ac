"""What every re-ranker is: scores for documents against a query, higher is better."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from docingest.pipeline.errors import RerankFailed


class Reranker(Protocol):
    """Scores documents for a query; built by
    `docingest.pipeline.rerank.registry.build_reranker`."""

    provider: str
    model: str
    endpoint: str
    """Where it is served, for logs and metrics (scheme, host and port; never a key)."""

    def scores(self, query: str, documents: Sequence[str], *, deadline: float) -> list[float]:
        """One finite score per document, in input order, higher is better.

        `deadline` is a `time.monotonic()` value the whole call, retries included, must end
        by. Raises `RerankFailed` (its `code` says why) on any failure.
        """
        ...

    def close(self) -> None:
        """Release its connections."""
        ...


def bad_reply(message: str) -> RerankFailed:
    return RerankFailed("rerank_bad_reply", f"The re-ranker's reply is unusable: {message}.")


def checked_scores(by_index: dict[int, float], count: int) -> list[float]:
    """Return the scores in input order, refusing a reply that misses a document."""
    missing = count - len(by_index)
    if missing:
        raise bad_reply(f"it scores {len(by_index)} of the {count} documents sent")
    return [by_index[index] for index in range(count)]


def score_of(value: object) -> float:
    """A reply's score as a finite float (JSON booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_reply(f"a score is {type(value).__name__}, not a number")
    score = float(value)
    if not math.isfinite(score):
        raise bad_reply("a score is not finite")
    return score


def index_of(value: object, count: int, seen: dict[int, float]) -> int:
    """A reply's document index, refusing one out of range or repeated."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
        raise bad_reply(f"an index is {value!r}, not one of 0..{count - 1}")
    if value in seen:
        raise bad_reply(f"index {value} is scored twice")
    return value
